// Standalone reproducer: Java's IOException carries no errno. A write that
// fails with ENOSPC and one that fails with EIO raise the same class; only
// strerror's text, in the message, tells them apart.
//
//   slowfs run --set 'write path=full error=ENOSPC' --set 'write path=broken error=EIO' \
//       -- java drivers/jvm/repro/NoErrno.java
//
// Exits 1 when both failures are the same exception class (no errno field to read).
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousFileChannel;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ExecutionException;

public class NoErrno {
    static Throwable failedWrite(String name) throws Exception {
        Path path = Paths.get(System.getenv("SLOWFS_MOUNT"), name);
        try (AsynchronousFileChannel channel = AsynchronousFileChannel.open(
                path, StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
            channel.write(ByteBuffer.wrap(new byte[100]), 0).get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    public static void main(String[] args) throws Exception {
        Throwable full = failedWrite("full");
        Throwable broken = failedWrite("broken");
        System.out.println("ENOSPC write: " + full);
        System.out.println("EIO write:    " + broken);
        boolean same = full != null && broken != null && full.getClass() == broken.getClass();
        if (same) {
            System.out.println("both " + full.getClass().getName()
                    + ", no errno: only the message text tells a full disk from a failing one");
        }
        System.exit(same ? 1 : 0);
    }
}
