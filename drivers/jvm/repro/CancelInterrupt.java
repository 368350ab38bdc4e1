// Standalone reproducer: Future.cancel(true) on an AsynchronousFileChannel
// operation closes the whole channel; and where the storage does not end a
// request on a signal, it blocks the cancelling thread until the operation
// ends, and a write still lands.
//
//   slowfs run --set 'read hang=3s' -- java drivers/jvm/repro/CancelInterrupt.java read
//   slowfs run --no-intr --set 'read hang=3s' -- java drivers/jvm/repro/CancelInterrupt.java read
//   slowfs run --no-intr --set 'write delay=100ms' -- java drivers/jvm/repro/CancelInterrupt.java write
//
// cancel(true) completes the Future, then calls the channel's close(), which
// signals the pool threads in I/O on the channel and waits for them to leave.
// slowfs, like NFS's old `intr` option, ends a held request whose thread gets
// a signal with a handler: the held read ends at once, but so does the
// channel. With --no-intr (NFS hard mounts: only SIGKILL ends a wait) the
// signal changes nothing and close() waits. Exits 1 when the channel was
// closed by the cancel, or a cancelled write landed.
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousFileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.Future;

public class CancelInterrupt {
    static String outcome(Future<Integer> f) {
        try {
            return "returned " + f.get();
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            return "threw " + cause.getClass().getSimpleName();
        }
    }

    public static void main(String[] args) throws Exception {
        boolean write = args.length > 0 && args[0].equals("write");
        Path path = Paths.get(System.getenv("SLOWFS_MOUNT"), "data");
        Files.write(path, new byte[] {'O', 'O'});
        AsynchronousFileChannel channel =
                AsynchronousFileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE);
        Future<Integer> first = write
                ? channel.write(ByteBuffer.wrap(new byte[] {'N'}), 0)
                : channel.read(ByteBuffer.allocate(1), 0);
        Future<Integer> other = write ? null : channel.read(ByteBuffer.allocate(1), 1);
        Thread.sleep(20); // both in pread(2)/pwrite(2) now, held by slowfs
        long start = System.nanoTime();
        boolean cancelled = first.cancel(true);
        System.out.printf("Future.cancel(true) returned %s after %.0f ms; the channel is %s%n",
                cancelled, (System.nanoTime() - start) / 1e6, channel.isOpen() ? "open" : "closed");
        System.out.println("the cancelled " + (write ? "write" : "read") + ": get() " + outcome(first));
        if (other != null) System.out.println("another read in flight on the channel: get() " + outcome(other));
        System.out.println("a read started after the cancel: get() "
                + outcome(channel.read(ByteBuffer.allocate(1), 0)));
        boolean landed = false;
        if (write) {
            Thread.sleep(300);
            landed = Files.readAllBytes(path)[0] == 'N';
            System.out.println("300 ms later the cancelled write " + (landed ? "has landed (ghost write)" : "has not landed"));
        }
        System.exit(!channel.isOpen() || landed ? 1 : 0);
    }
}
