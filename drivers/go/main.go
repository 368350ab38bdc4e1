// A slowfs driver (protocol v1, docs/driver-protocol.md) for Go's os.File, the
// standard library only:
//
//	cd drivers/go && GOTOOLCHAIN=local go run . --api osfile       # no cancel: f.SetDeadline
//	cd drivers/go && GOTOOLCHAIN=local go run . --api osfile-ctx   # the context idiom
//
// Every request runs in a goroutine of its own, as Go code does its file I/O: a
// blocking pread(2)/pwrite(2)/fsync(2) in the goroutine, during which the
// runtime parks the goroutine's OS thread in the syscall and hands its P to
// another thread (so other goroutines go on; each blocked call costs an OS
// thread, up to debug.SetMaxThreads, 10,000 by default, beyond which the
// process dies: "runtime: program exceeds 10000-thread limit").
//
// os.File has no cancel. What cancel means here:
//
//	osfile      f.SetDeadline(time.Now()), Go's own way to interrupt I/O on an
//	            *os.File. It cannot reach a ReadAt/WriteAt in progress: pread
//	            and pwrite bypass the netpoller. On a local disk's file it
//	            fails (os.ErrNoDeadline); on a FUSE file it returns nil, as Go
//	            registers FUSE files with its netpoller (epoll accepts them),
//	            and still does nothing to the call. So a request answers when
//	            its syscall ends, whatever the cancel (as the Node driver
//	            answers). f.Close() does not help either: on a FUSE file it
//	            waits for the calls in progress (internal/poll's FD.Close).
//	osfile-ctx  what Go code does instead: the call in a goroutine and a select
//	            on ctx.Done(); the cancel answers at once (`cancelled`,
//	            context.Canceled) and abandons the goroutine, whose syscall goes
//	            on and whose write lands later.
//
// Go's loops, as they are:
//
//	ReadAt/WriteAt  loop until the whole buffer is moved (io.ReaderAt and
//	                io.WriterAt's contract): a short pread/pwrite is followed by
//	                another; an error after a partial write is reported as the
//	                error (the protocol has no "n and an error").
//	append          WriteAt refuses a file opened with O_APPEND ("os: invalid
//	                use of WriteAt on file opened with O_APPEND"), and f.Write,
//	                Go's way to append, moves the file's cursor (write(2)):
//	                there is no positioned write on an append-mode file, so the
//	                driver declares no `append` and answers such an open
//	                `unsupported` (positioned is judged without append mode).
//	read            f.Read at the fd's cursor: one read(2), short counts kept.
//	fdatasync       os.File has none: syscall.Fdatasync on the fd, through
//	                f.SyscallConn().Control (which keeps the fd open meanwhile).
//	sync_dir        os.Open(dir) then Sync().
//
// Errors keep their errno: *os.PathError wraps a syscall.Errno. They are
// answered as Go returns them, EINTR included: Go retries EINTR around pread,
// pwrite, fsync, open and the like, but not around close(2), and its own
// preemption signal (SIGURG, since Go 1.14) can land while close(2) waits for
// FUSE's FLUSH; a filesystem that ends an interrupted request (slowfs, like
// NFS `intr`) then makes f.Close() fail with EINTR (golang/go#44964).
//
// No loop_thread: Go has no event-loop thread. Goroutines move between OS
// threads, and the thread that ran the heartbeat a moment ago may be the one
// in the next pread. loop-lag judges from the heartbeat goroutine (1 ms
// sleeps) against its control.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"
)

const protocolVersion = 1

const appendReason = "os.File has no positioned write on an append-mode file: WriteAt refuses O_APPEND " +
	"(os: invalid use of WriteAt on file opened with O_APPEND), and f.Write moves the cursor"

type request struct {
	ID        *uint64 `json:"id"`
	Cancel    *uint64 `json:"cancel"`
	Op        string  `json:"op"`
	Path      string  `json:"path"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	File      uint64  `json:"file"`
	Offset    int64   `json:"offset"`
	Len       int     `json:"len"`
	Data      []byte  `json:"data"` // base64 in JSON
	Read      bool    `json:"read"`
	Write     bool    `json:"write"`
	Create    bool    `json:"create"`
	Truncate  bool    `json:"truncate"`
	Append    bool    `json:"append"`
	CreateNew bool    `json:"create_new"`
	Reset     bool    `json:"reset"`
}

type obj = map[string]any

// unsupportedError is answered `unsupported`.
type unsupportedError struct{ what string }

func (e unsupportedError) Error() string { return e.what }

type driver struct {
	api   string
	outMu sync.Mutex
	out   *bufio.Writer

	mu       sync.Mutex
	files    map[uint64]*os.File
	nextFile uint64
	// Requests in flight, for cancel: their file (osfile) or their context's
	// cancel function (osfile-ctx).
	onFile    map[uint64]*os.File
	deadlined map[uint64]bool // osfile: requests whose file got a deadline
	cancels   map[uint64]context.CancelFunc

	beat heartbeat
}

// heartbeat sleeps 1 ms at a time and records how late it wakes (ms).
type heartbeat struct {
	mu   sync.Mutex
	late []float64
}

func (h *heartbeat) run() {
	for {
		start := time.Now()
		time.Sleep(time.Millisecond)
		l := float64(time.Since(start))/1e6 - 1
		h.mu.Lock()
		h.late = append(h.late, l)
		h.mu.Unlock()
	}
}

func (h *heartbeat) report(reset bool) obj {
	h.mu.Lock()
	late := append([]float64(nil), h.late...)
	if reset {
		h.late = nil
	}
	h.mu.Unlock()
	sort.Float64s(late)
	if len(late) == 0 {
		return obj{"samples": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
	}
	pick := func(q float64) float64 {
		i := int(q * float64(len(late)))
		if i > len(late)-1 {
			i = len(late) - 1
		}
		return late[i]
	}
	over := []float64{}
	for _, l := range late {
		if l > 10 {
			over = append(over, l)
		}
	}
	return obj{"samples": len(late), "p50_ms": pick(0.5), "p99_ms": pick(0.99),
		"max_ms": late[len(late)-1], "late_ms": over}
}

func (d *driver) send(m obj) {
	line, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	d.outMu.Lock()
	defer d.outMu.Unlock()
	d.out.Write(line)
	d.out.WriteByte('\n')
	if d.out.Flush() != nil {
		os.Exit(1) // the runner is gone
	}
}

func openFlags(r *request) int {
	var flags int
	switch {
	case r.Read && (r.Write || r.Append):
		flags = os.O_RDWR
	case r.Write || r.Append:
		flags = os.O_WRONLY
	default:
		flags = os.O_RDONLY
	}
	if r.CreateNew {
		flags |= os.O_CREATE | os.O_EXCL
	} else if r.Create {
		flags |= os.O_CREATE
	}
	if r.Truncate {
		flags |= os.O_TRUNC
	}
	if r.Append {
		flags |= os.O_APPEND
	}
	return flags
}

func (d *driver) file(id uint64) (*os.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.files[id]
	if !ok {
		return nil, os.ErrClosed
	}
	return f, nil
}

// handle does one request, blocking its goroutine as os.File does.
func (d *driver) handle(r *request) (obj, error) {
	switch r.Op {
	case "lag":
		return d.beat.report(r.Reset), nil
	case "open":
		if r.Append {
			return nil, unsupportedError{appendReason}
		}
		f, err := os.OpenFile(r.Path, openFlags(r), 0o644)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.nextFile++
		id := d.nextFile
		d.files[id] = f
		d.mu.Unlock()
		return obj{"file": id}, nil
	case "rename":
		return obj{}, os.Rename(r.From, r.To)
	case "copy":
		return copyFile(r.From, r.To)
	case "remove_file":
		return obj{}, os.Remove(r.Path)
	case "create_dir":
		return obj{}, os.Mkdir(r.Path, 0o755)
	case "sync_dir":
		dir, err := os.Open(r.Path)
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		return obj{}, dir.Sync()
	}
	f, err := d.file(r.File)
	if err != nil {
		return nil, err
	}
	switch r.Op {
	case "read_at":
		buf := make([]byte, r.Len)
		n, err := f.ReadAt(buf, r.Offset)
		if err != nil && err != io.EOF {
			return nil, err
		}
		return obj{"data": buf[:n]}, nil
	case "read":
		buf := make([]byte, r.Len)
		n, err := f.Read(buf)
		if err != nil && err != io.EOF {
			return nil, err
		}
		return obj{"data": buf[:n]}, nil
	case "write_at":
		n, err := f.WriteAt(r.Data, r.Offset)
		if err != nil {
			return nil, err
		}
		return obj{"n": n}, nil
	case "fsync":
		return obj{}, f.Sync()
	case "fdatasync":
		conn, err := f.SyscallConn()
		if err != nil {
			return nil, err
		}
		var syncErr error
		if err := conn.Control(func(fd uintptr) { syncErr = syscall.Fdatasync(int(fd)) }); err != nil {
			return nil, err
		}
		if syncErr != nil {
			return nil, &os.PathError{Op: "fdatasync", Path: f.Name(), Err: syncErr}
		}
		return obj{}, nil
	case "set_len":
		return obj{}, f.Truncate(int64(r.Len))
	case "metadata":
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		return obj{"len": st.Size()}, nil
	case "close":
		d.mu.Lock()
		delete(d.files, r.File)
		d.mu.Unlock()
		return obj{}, f.Close()
	}
	return nil, unsupportedError{fmt.Sprintf("go:%s has no %s", d.api, r.Op)}
}

func copyFile(from, to string) (obj, error) {
	src, err := os.Open(from)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(dst, src) // copy_file_range(2) where it can
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return obj{"n": n}, nil
}

func (d *driver) failure(id uint64, err error) obj {
	var unsupported unsupportedError
	if errors.As(err, &unsupported) {
		return obj{"id": id, "err": "unsupported", "message": err.Error()}
	}
	if errors.Is(err, context.Canceled) {
		return obj{"id": id, "err": "cancelled"}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return obj{"id": id, "err": errnoName(errno), "errno": int(errno), "message": err.Error()}
	}
	// Go's own errors, no errno: io.ErrUnexpectedEOF (a write that moved 0
	// bytes), os.ErrClosed, ...
	name := "error"
	for _, known := range []struct {
		err  error
		name string
	}{{io.ErrUnexpectedEOF, "io.ErrUnexpectedEOF"}, {os.ErrClosed, "os.ErrClosed"}} {
		if errors.Is(err, known.err) {
			name = known.name
		}
	}
	return obj{"id": id, "err": name, "errno": 0, "message": err.Error()}
}

func errnoName(e syscall.Errno) string {
	names := map[syscall.Errno]string{
		syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.EINTR: "EINTR", syscall.EIO: "EIO",
		syscall.EBADF: "EBADF", syscall.EAGAIN: "EAGAIN", syscall.EACCES: "EACCES", syscall.EEXIST: "EEXIST",
		syscall.ENOTDIR: "ENOTDIR", syscall.EISDIR: "EISDIR", syscall.EINVAL: "EINVAL", syscall.EFBIG: "EFBIG",
		syscall.ENOSPC: "ENOSPC", syscall.EROFS: "EROFS", syscall.ENOTEMPTY: "ENOTEMPTY",
		syscall.EDQUOT: "EDQUOT", syscall.ESTALE: "ESTALE", syscall.ETIMEDOUT: "ETIMEDOUT",
	}
	if name, ok := names[e]; ok {
		return name
	}
	return fmt.Sprintf("errno %d", int(e))
}

func (d *driver) answer(id uint64, ok obj, err error) {
	if err != nil {
		d.send(d.failure(id, err))
	} else {
		d.send(obj{"id": id, "ok": ok})
	}
}

// track registers request r for cancel, before its goroutine starts (a cancel
// may follow at once), and returns its context.
func (d *driver) track(r *request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.api == "osfile-ctx" {
		d.cancels[*r.ID] = cancel
	} else if f, ok := d.files[r.File]; ok && r.File != 0 {
		d.onFile[*r.ID] = f
	}
	return ctx, cancel
}

// serve runs one request in its own goroutine and answers it.
func (d *driver) serve(r *request, ctx context.Context, cancel context.CancelFunc) {
	id := *r.ID
	defer func() {
		d.mu.Lock()
		f, cancelled := d.onFile[id], d.deadlined[id]
		delete(d.onFile, id)
		delete(d.cancels, id)
		delete(d.deadlined, id)
		d.mu.Unlock()
		if cancelled {
			// As with a net.Conn: clear the deadline, or the file's later
			// cursor reads (which do consult it) fail with "i/o timeout".
			f.SetDeadline(time.Time{})
		}
		cancel()
	}()
	if d.api == "osfile" {
		ok, err := d.handle(r)
		d.answer(id, ok, err)
		return
	}
	// osfile-ctx: the call in a goroutine, a select on it and on ctx.Done().
	type result struct {
		ok  obj
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := d.handle(r)
		done <- result{ok, err}
	}()
	select {
	case res := <-done:
		d.answer(id, res.ok, res.err)
	case <-ctx.Done():
		d.answer(id, nil, ctx.Err()) // the goroutine goes on, abandoned
	}
}

func (d *driver) cancel(id uint64) {
	d.mu.Lock()
	f := d.onFile[id]
	cancel := d.cancels[id]
	if f != nil {
		d.deadlined[id] = true
	}
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if f != nil {
		if err := f.SetDeadline(time.Now()); err != nil {
			fmt.Fprintf(os.Stderr, "cancel of request %d: SetDeadline: %v\n", id, err)
		}
	}
}

func main() {
	api := ""
	for i, a := range os.Args {
		if a == "--api" && i+1 < len(os.Args) {
			api = os.Args[i+1]
		}
	}
	if api != "osfile" && api != "osfile-ctx" {
		fmt.Fprintln(os.Stderr, "usage: go run . --api osfile|osfile-ctx")
		os.Exit(2)
	}
	d := &driver{
		api:       api,
		out:       bufio.NewWriter(os.Stdout),
		files:     map[uint64]*os.File{},
		onFile:    map[uint64]*os.File{},
		deadlined: map[uint64]bool{},
		cancels:   map[uint64]context.CancelFunc{},
	}
	go d.beat.run()
	d.send(obj{
		"hello":       "slowfs-driver",
		"version":     protocolVersion,
		"engine":      "go:" + api,
		"positioned":  true,
		"unsupported": obj{"append": appendReason},
		"capabilities": []string{"open", "read_at", "write_at", "read_many", "write_many", "read",
			"fsync", "fdatasync", "set_len", "metadata", "close", "rename", "remove_file", "create_dir",
			"sync_dir", "copy", "cancel", "lag"},
	})
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var r request
			if jerr := json.Unmarshal(line, &r); jerr != nil {
				fmt.Fprintf(os.Stderr, "bad request %q: %v\n", line, jerr)
				os.Exit(2)
			}
			switch {
			case r.Cancel != nil:
				d.cancel(*r.Cancel)
			case r.ID != nil:
				ctx, cancel := d.track(&r)
				go d.serve(&r, ctx, cancel)
			}
		}
		if err != nil {
			os.Exit(0)
		}
	}
}
