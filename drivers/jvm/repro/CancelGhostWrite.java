// Standalone reproducer: Future.cancel(false) on an AsynchronousFileChannel
// write reports it cancelled while the write goes on and lands.
//
//   slowfs run --set 'write delay=100ms' -- java drivers/jvm/repro/CancelGhostWrite.java
//
// (`slowfs run` mounts a fresh slowfs at $SLOWFS_MOUNT for the command.) The
// channel runs each write as a blocking pwrite(2) on a thread of its pool;
// cancel(false) completes the Future (get() throws CancellationException) and
// leaves that thread alone. Exits 1 when the "cancelled" byte is in the file.
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousFileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CancellationException;
import java.util.concurrent.Future;

public class CancelGhostWrite {
    public static void main(String[] args) throws Exception {
        Path path = Paths.get(System.getenv("SLOWFS_MOUNT"), "data");
        Files.write(path, new byte[] {'O'});
        AsynchronousFileChannel channel =
                AsynchronousFileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE);
        Future<Integer> write = channel.write(ByteBuffer.wrap(new byte[] {'N'}), 0);
        Thread.sleep(20); // the write is in pwrite(2) now, held by slowfs
        long start = System.nanoTime();
        boolean cancelled = write.cancel(false);
        String outcome;
        try {
            outcome = "get() returned " + write.get();
        } catch (CancellationException e) {
            outcome = "get() threw CancellationException";
        }
        System.out.printf("Future.cancel(false) returned %s after %.0f ms; %s%n",
                cancelled, (System.nanoTime() - start) / 1e6, outcome);
        Thread.sleep(300);
        byte now = Files.readAllBytes(path)[0];
        boolean ghost = cancelled && now == 'N';
        System.out.println("300 ms later the file holds '" + (char) now + "'"
                + (ghost ? ": the cancelled write landed (ghost write)" : ": the write did not land"));
        channel.close();
        System.exit(ghost ? 1 : 0);
    }
}
