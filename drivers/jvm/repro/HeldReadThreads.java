// Standalone reproducer: every AsynchronousFileChannel operation the storage
// holds keeps a thread of the default pool (an unbounded cached pool): 64
// held reads, 64 more threads.
//
//   slowfs run --set 'read hang=2s' -- java drivers/jvm/repro/HeldReadThreads.java
//
// Exits 1 when the held reads added a thread each.
import java.io.File;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousFileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Future;

public class HeldReadThreads {
    static int threads() {
        return new File("/proc/self/task").list().length;
    }

    public static void main(String[] args) throws Exception {
        int reads = 64;
        Path path = Paths.get(System.getenv("SLOWFS_MOUNT"), "data");
        Files.write(path, new byte[4096]);
        AsynchronousFileChannel channel = AsynchronousFileChannel.open(path, StandardOpenOption.READ);
        int before = threads();
        List<Future<Integer>> held = new ArrayList<>();
        for (int i = 0; i < reads; i++) held.add(channel.read(ByteBuffer.allocate(1), 0));
        Thread.sleep(500);
        int during = threads();
        System.out.printf("threads: %d before, %d with %d reads held (+%d)%n", before, during, reads, during - before);
        for (Future<Integer> f : held) f.get();
        channel.close();
        System.exit(during - before >= reads ? 1 : 0);
    }
}
