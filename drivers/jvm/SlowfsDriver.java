// A slowfs driver (protocol v1, docs/driver-protocol.md) for Java NIO's
// AsynchronousFileChannel. One source file, the JDK only (Java 11+ runs it as
// it stands, no build step):
//
//   java drivers/jvm/SlowfsDriver.java --api nio             # Future.cancel(false)
//   java drivers/jvm/SlowfsDriver.java --api nio-interrupt   # Future.cancel(true)
//
// What the library is: on Linux, AsynchronousFileChannel.open gives a
// sun.nio.ch.SimpleAsynchronousFileChannelImpl, whose read and write run a
// blocking pread(2)/pwrite(2) each on a thread of the channel's executor (by
// default one unbounded cached pool per JVM, daemon threads). read/write return
// a Future at once; nothing else of the API is asynchronous: open, force (fsync),
// truncate, size and close block their caller. This driver keeps an event loop
// of its own (one thread, "slowfs-loop", whose id it declares as `loop_thread`):
// the loop starts reads and writes and never blocks; a thread per request waits
// on its Future (Future.get(), as a caller of the Future API does) and answers;
// the blocking calls run on a pool of their own, as event-loop users of the API
// run them (Vert.x: executeBlocking).
//
// Cancel is Future.cancel, the API's only cancel:
//   nio            cancel(false): the Future is cancelled at once (get() throws
//                  CancellationException, answered `cancelled`) while the pool
//                  thread goes on with its pread/pwrite, which can land later.
//   nio-interrupt  cancel(true): the same, and then the Future closes the whole
//                  channel, on the cancelling thread (here the loop): close()
//                  signals the pool threads in I/O on that channel and waits
//                  for them to leave. Where the storage ends a request on a
//                  signal (slowfs, NFS `intr`) the operation ends at once; where
//                  it does not (slowfs --no-intr, NFS hard mounts) cancel(true)
//                  waits for it, and a write lands. Every later operation on the
//                  channel fails (ClosedChannelException), and so does any
//                  other in flight (AsynchronousCloseException).
//
// Also absent from the API, done here as its users do it:
//   append         AsynchronousFileChannel refuses APPEND (the open is passed
//                  to the library, which throws; answered `unsupported`).
//   set_len        truncate() only shrinks; growing a file is a 1-byte write
//                  of 0 at len-1.
//   read           (at a cursor) the channel has no position: the driver keeps
//                  one per handle.
//   fdatasync      force(false); fsync is force(true).
//   sync_dir       FileChannel.open(dir, READ).force(true), as Lucene does.
//
// Errors: an IOException carries no errno, only strerror's text ("No space left
// on device"); the driver maps that text (and the classes that stand for one:
// NoSuchFileException, FileAlreadyExistsException, ...) back to the errno, as
// Java code that must tell ENOSPC from EIO does. Java's own state errors
// (ClosedChannelException, ...) are answered without an errno.
//
// The protocol's messages are flat JSON objects: the parser and printer below
// are just enough for them.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousFileChannel;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

public class SlowfsDriver {
    static final int PROTOCOL_VERSION = 1;

    /** An open channel and the cursor the protocol's `read` moves. */
    static final class Handle {
        final AsynchronousFileChannel channel;
        final AtomicLong cursor = new AtomicLong();

        Handle(AsynchronousFileChannel channel) {
            this.channel = channel;
        }
    }

    /** An operation the library refuses (append mode); answered `unsupported`. */
    static final class Unsupported extends Exception {
        private static final long serialVersionUID = 1L;

        Unsupported(String message) {
            super(message);
        }
    }

    final String api;
    final boolean interrupt;
    final OutputStream out = new FileOutputStream(FileDescriptor.out);
    /** The event loop: starts reads and writes, answers cancels, runs the heartbeat. */
    final ScheduledThreadPoolExecutor loop =
            new ScheduledThreadPoolExecutor(1, r -> daemon(r, "slowfs-loop"));
    /** Callers of the blocking parts of the API (open, force, truncate, size, close). */
    final ExecutorService blocking = Executors.newCachedThreadPool(r -> daemon(r, "slowfs-blocking"));
    /** A thread per read or write, waiting on its Future (Future.get()). */
    final ExecutorService waiters = Executors.newCachedThreadPool(r -> daemon(r, "slowfs-waiter"));
    final Map<Long, Handle> files = new ConcurrentHashMap<>();
    final AtomicLong nextFile = new AtomicLong(1);
    /** Requests with a Future in flight, for `cancel`. */
    final Map<Long, Future<Integer>> inFlight = new ConcurrentHashMap<>();
    /** Heartbeat lateness in ms; touched only on the loop thread. */
    List<Double> late = new ArrayList<>();

    SlowfsDriver(String api) {
        this.api = api;
        this.interrupt = api.equals("nio-interrupt");
    }

    static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    public static void main(String[] args) throws Exception {
        String api = null;
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals("--api")) api = args[i + 1];
        }
        if (api == null || !(api.equals("nio") || api.equals("nio-interrupt"))) {
            System.err.println("usage: java SlowfsDriver.java --api nio|nio-interrupt");
            System.exit(2);
        }
        new SlowfsDriver(api).serve();
    }

    void serve() throws Exception {
        // The loop's kernel thread id (/proc/thread-self names it), for loop_thread.
        long loopThread = loop.submit(() -> {
            Path self = Files.readSymbolicLink(Paths.get("/proc/thread-self"));
            return Long.parseLong(self.getFileName().toString());
        }).get();
        loop.execute(this::heartbeat);
        Map<String, Object> unsupported = new LinkedHashMap<>();
        unsupported.put("append", "AsynchronousFileChannel has no append mode: open refuses StandardOpenOption.APPEND");
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("hello", "slowfs-driver");
        hello.put("version", PROTOCOL_VERSION);
        hello.put("engine", "jvm:" + api);
        hello.put("positioned", true);
        hello.put("loop_thread", loopThread);
        hello.put("capabilities", List.of("open", "read_at", "write_at", "read_many", "write_many", "read",
                "fsync", "fdatasync", "set_len", "metadata", "close", "rename", "remove_file", "create_dir",
                "sync_dir", "copy", "cancel", "lag"));
        hello.put("unsupported", unsupported);
        send(hello);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 20);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Map<String, Object> req = Json.parseObject(line);
            if (req.containsKey("cancel")) {
                long id = ((Number) req.get("cancel")).longValue();
                loop.execute(() -> cancel(id));
            } else {
                loop.execute(() -> dispatch(req));
            }
        }
        System.exit(0);
    }

    /** Sleeps 1 ms at a time on the loop and records how late it wakes. */
    void heartbeat() {
        long start = System.nanoTime();
        loop.schedule(() -> {
            late.add((System.nanoTime() - start) / 1e6 - 1.0);
            heartbeat();
        }, 1, TimeUnit.MILLISECONDS);
    }

    Map<String, Object> lag(boolean reset) {
        List<Double> sorted = new ArrayList<>(late);
        Collections.sort(sorted);
        if (reset) late = new ArrayList<>();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("samples", sorted.size());
        if (sorted.isEmpty()) {
            r.put("p50_ms", 0.0);
            r.put("p99_ms", 0.0);
            r.put("max_ms", 0.0);
            return r;
        }
        int n = sorted.size();
        r.put("p50_ms", sorted.get(Math.min(n - 1, (int) (0.5 * n))));
        r.put("p99_ms", sorted.get(Math.min(n - 1, (int) (0.99 * n))));
        r.put("max_ms", sorted.get(n - 1));
        List<Object> over = new ArrayList<>();
        for (double l : sorted) if (l > 10) over.add(l);
        r.put("late_ms", over);
        return r;
    }

    /** Runs on the loop thread: never blocks. */
    void dispatch(Map<String, Object> req) {
        long id = ((Number) req.get("id")).longValue();
        String op = (String) req.get("op");
        try {
            switch (op) {
                case "lag":
                    answer(id, lag(Boolean.TRUE.equals(req.get("reset"))));
                    return;
                case "read_at":
                case "read": {
                    Handle h = handle(req);
                    int len = ((Number) req.get("len")).intValue();
                    boolean cursor = op.equals("read");
                    long offset = cursor ? h.cursor.get() : ((Number) req.get("offset")).longValue();
                    ByteBuffer buf = ByteBuffer.allocate(len);
                    Future<Integer> f = h.channel.read(buf, offset);
                    await(id, f, n -> {
                        int got = Math.max(n, 0); // -1 at EOF
                        if (cursor) h.cursor.addAndGet(got);
                        byte[] data = new byte[got];
                        System.arraycopy(buf.array(), 0, data, 0, got);
                        return Map.of("data", Base64.getEncoder().encodeToString(data));
                    });
                    return;
                }
                case "write_at": {
                    Handle h = handle(req);
                    byte[] data = Base64.getDecoder().decode((String) req.get("data"));
                    long offset = ((Number) req.get("offset")).longValue();
                    Future<Integer> f = h.channel.write(ByteBuffer.wrap(data), offset);
                    await(id, f, n -> Map.of("n", n));
                    return;
                }
                default:
                    blocking.execute(() -> {
                        try {
                            answer(id, blockingOp(op, req));
                        } catch (Throwable e) {
                            fail(id, e);
                        }
                    });
            }
        } catch (Throwable e) {
            fail(id, e);
        }
    }

    interface Result {
        Map<String, Object> of(int n);
    }

    /** A thread waits on the Future (Future.get()) and answers what it says. */
    void await(long id, Future<Integer> f, Result result) {
        inFlight.put(id, f);
        waiters.execute(() -> {
            try {
                int n = f.get();
                inFlight.remove(id);
                answer(id, result.of(n));
            } catch (Throwable e) {
                inFlight.remove(id);
                fail(id, e);
            }
        });
    }

    /** Future.cancel, on the loop thread; the waiter answers. */
    void cancel(long id) {
        Future<Integer> f = inFlight.get(id);
        if (f == null) return; // answered already, or not cancellable (a blocking call)
        long start = System.nanoTime();
        boolean cancelled = f.cancel(interrupt);
        long took = (System.nanoTime() - start) / 1_000_000;
        if (took > 10) {
            System.err.printf("Future.cancel(%s) of request %d took %d ms (returned %s)%n",
                    interrupt, id, took, cancelled);
        }
    }

    Handle handle(Map<String, Object> req) throws IOException {
        Handle h = files.get(((Number) req.get("file")).longValue());
        if (h == null) throw new ClosedChannelException(); // closed by an earlier `close`
        return h;
    }

    /** The operations AsynchronousFileChannel offers only as blocking calls. */
    Map<String, Object> blockingOp(String op, Map<String, Object> req) throws Exception {
        switch (op) {
            case "open": {
                Set<OpenOption> options = new HashSet<>();
                if (flag(req, "read")) options.add(StandardOpenOption.READ);
                if (flag(req, "write")) options.add(StandardOpenOption.WRITE);
                if (flag(req, "append")) options.add(StandardOpenOption.APPEND);
                if (flag(req, "create")) options.add(StandardOpenOption.CREATE);
                if (flag(req, "create_new")) options.add(StandardOpenOption.CREATE_NEW);
                if (flag(req, "truncate")) options.add(StandardOpenOption.TRUNCATE_EXISTING);
                if (options.isEmpty()) options.add(StandardOpenOption.READ);
                AsynchronousFileChannel channel;
                try {
                    channel = AsynchronousFileChannel.open(Paths.get((String) req.get("path")), options, null);
                } catch (UnsupportedOperationException | IllegalArgumentException e) {
                    // AsynchronousFileChannel's own refusal of APPEND.
                    if (!flag(req, "append")) throw e;
                    throw new Unsupported("AsynchronousFileChannel.open refuses APPEND: " + e);
                }
                long file = nextFile.getAndIncrement();
                files.put(file, new Handle(channel));
                return Map.of("file", file);
            }
            case "rename":
                Files.move(Paths.get((String) req.get("from")), Paths.get((String) req.get("to")),
                        StandardCopyOption.ATOMIC_MOVE);
                return Map.of();
            case "copy": {
                Path to = Paths.get((String) req.get("to"));
                Files.copy(Paths.get((String) req.get("from")), to, StandardCopyOption.REPLACE_EXISTING);
                return Map.of("n", Files.size(to));
            }
            case "remove_file":
                Files.delete(Paths.get((String) req.get("path")));
                return Map.of();
            case "create_dir":
                Files.createDirectory(Paths.get((String) req.get("path")));
                return Map.of();
            case "sync_dir":
                try (FileChannel dir = FileChannel.open(Paths.get((String) req.get("path")), StandardOpenOption.READ)) {
                    dir.force(true);
                }
                return Map.of();
        }
        Handle h = handle(req);
        switch (op) {
            case "fsync":
                h.channel.force(true);
                return Map.of();
            case "fdatasync":
                h.channel.force(false);
                return Map.of();
            case "set_len": {
                long len = ((Number) req.get("len")).longValue();
                long size = h.channel.size();
                if (len < size) {
                    h.channel.truncate(len);
                } else if (len > size) {
                    // truncate() never grows a file: write one zero byte at len-1.
                    h.channel.write(ByteBuffer.allocate(1), len - 1).get();
                }
                return Map.of();
            }
            case "metadata":
                return Map.of("len", h.channel.size());
            case "close":
                files.remove(((Number) req.get("file")).longValue());
                h.channel.close();
                return Map.of();
        }
        throw new Unsupported("jvm:" + api + " has no " + op);
    }

    static boolean flag(Map<String, Object> req, String name) {
        return Boolean.TRUE.equals(req.get(name));
    }

    void answer(long id, Map<String, Object> ok) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("ok", ok);
        send(m);
    }

    void fail(long id, Throwable e) {
        while ((e instanceof ExecutionException) && e.getCause() != null) e = e.getCause();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        if (e instanceof CancellationException) {
            m.put("err", "cancelled");
        } else if (e instanceof Unsupported) {
            m.put("err", "unsupported");
            m.put("message", e.getMessage());
        } else {
            int errno = Errno.of(e);
            m.put("err", errno != 0 ? Errno.name(errno) : e.getClass().getSimpleName());
            m.put("errno", errno);
            m.put("message", e.toString());
        }
        send(m);
    }

    void send(Map<String, Object> message) {
        byte[] line = (Json.write(message) + "\n").getBytes(StandardCharsets.UTF_8);
        synchronized (out) {
            try {
                out.write(line);
                out.flush();
            } catch (IOException e) {
                System.exit(1); // the runner is gone
            }
        }
    }

    /** An IOException's errno, recovered from its class or its strerror text (0: none). */
    static final class Errno {
        static final String[][] TABLE = {
            {"1", "EPERM", "Operation not permitted"},
            {"2", "ENOENT", "No such file or directory"},
            {"4", "EINTR", "Interrupted system call"},
            {"5", "EIO", "Input/output error"},
            {"6", "ENXIO", "No such device or address"},
            {"9", "EBADF", "Bad file descriptor"},
            {"11", "EAGAIN", "Resource temporarily unavailable"},
            {"12", "ENOMEM", "Cannot allocate memory"},
            {"13", "EACCES", "Permission denied"},
            {"16", "EBUSY", "Device or resource busy"},
            {"17", "EEXIST", "File exists"},
            {"18", "EXDEV", "Invalid cross-device link"},
            {"19", "ENODEV", "No such device"},
            {"20", "ENOTDIR", "Not a directory"},
            {"21", "EISDIR", "Is a directory"},
            {"22", "EINVAL", "Invalid argument"},
            {"23", "ENFILE", "Too many open files in system"},
            {"24", "EMFILE", "Too many open files"},
            {"26", "ETXTBSY", "Text file busy"},
            {"27", "EFBIG", "File too large"},
            {"28", "ENOSPC", "No space left on device"},
            {"30", "EROFS", "Read-only file system"},
            {"36", "ENAMETOOLONG", "File name too long"},
            {"38", "ENOSYS", "Function not implemented"},
            {"39", "ENOTEMPTY", "Directory not empty"},
            {"40", "ELOOP", "Too many levels of symbolic links"},
            {"75", "EOVERFLOW", "Value too large for defined data type"},
            {"95", "EOPNOTSUPP", "Operation not supported"},
            {"110", "ETIMEDOUT", "Connection timed out"},
            {"116", "ESTALE", "Stale file handle"},
            {"121", "EREMOTEIO", "Remote I/O error"},
            {"122", "EDQUOT", "Disk quota exceeded"},
            {"125", "ECANCELED", "Operation canceled"},
        };

        static int of(Throwable e) {
            // The class first: these carry a path, not the errno's text.
            if (e instanceof NoSuchFileException) return 2;
            if (e instanceof FileAlreadyExistsException) return 17;
            if (e instanceof DirectoryNotEmptyException) return 39;
            if (e instanceof NotDirectoryException) return 20;
            // ClosedChannelException (and AsynchronousCloseException, a subclass),
            // NonReadable/NonWritableChannelException: Java's own state checks,
            // no system call failed: no errno (the runner shows the class).
            String text = e instanceof FileSystemException ? ((FileSystemException) e).getReason() : e.getMessage();
            if (text != null) {
                for (String[] row : TABLE) {
                    if (text.equals(row[2]) || text.endsWith(": " + row[2])) return Integer.parseInt(row[0]);
                }
            }
            if (e instanceof AccessDeniedException) return 13;
            return 0;
        }

        static String name(int errno) {
            for (String[] row : TABLE) if (Integer.parseInt(row[0]) == errno) return row[1];
            return "E" + errno;
        }
    }

    /** Just enough JSON for the protocol: objects, arrays, strings, numbers, booleans, null. */
    static final class Json {
        final String s;
        int i;

        Json(String s) {
            this.s = s;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> parseObject(String line) {
            Json p = new Json(line);
            p.ws();
            Object v = p.value();
            if (!(v instanceof Map)) throw new IllegalArgumentException("not a JSON object: " + line);
            return (Map<String, Object>) v;
        }

        void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        Object value() {
            ws();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    ws();
                    String key = string();
                    ws();
                    expect(':');
                    m.put(key, value());
                    ws();
                    if (s.charAt(i) == ',') {
                        i++;
                        continue;
                    }
                    expect('}');
                    return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                ws();
                if (s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    ws();
                    if (s.charAt(i) == ',') {
                        i++;
                        continue;
                    }
                    expect(']');
                    return l;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String num = s.substring(start, i);
            if (num.isEmpty()) throw new IllegalArgumentException("bad JSON at " + start + ": " + s);
            if (num.contains(".") || num.contains("e") || num.contains("E")) return Double.parseDouble(num);
            return Long.parseLong(num);
        }

        void expect(char c) {
            if (s.charAt(i) != c) throw new IllegalArgumentException("expected '" + c + "' at " + i + ": " + s);
            i++;
        }

        String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u':
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                        break;
                    default: b.append(e); // " \ /
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        @SuppressWarnings("unchecked")
        static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof String) {
                b.append('"');
                for (char c : ((String) v).toCharArray()) {
                    if (c == '"' || c == '\\') b.append('\\').append(c);
                    else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
                b.append('"');
            } else if (v instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                    if (!first) b.append(',');
                    first = false;
                    write(b, e.getKey());
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List) {
                b.append('[');
                boolean first = true;
                for (Object o : (List<Object>) v) {
                    if (!first) b.append(',');
                    first = false;
                    write(b, o);
                }
                b.append(']');
            } else {
                b.append(v); // Number, Boolean
            }
        }
    }
}
