// Standalone reproducer: os.File cannot cancel a read the storage holds.
// SetDeadline does not reach a ReadAt in progress (on a FUSE file it returns
// nil, as Go polls FUSE files with epoll; on a local disk's file it returns
// os.ErrNoDeadline), Close waits for it, and each held read keeps an OS thread
// until the storage lets go.
//
//	cd drivers/go && slowfs run --set 'read hang=3s' -- go run ./repro/heldread
//
// (`slowfs run` mounts a fresh slowfs at $SLOWFS_MOUNT for the command.)
// Exits 1 when the held reads answered only when the storage let go.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func threads() int {
	entries, _ := os.ReadDir("/proc/self/task")
	return len(entries)
}

func main() {
	const reads = 64
	path := filepath.Join(os.Getenv("SLOWFS_MOUNT"), "data")
	if err := os.WriteFile(path, make([]byte, 4096), 0o644); err != nil {
		panic(err)
	}
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	before := threads()
	start := time.Now()
	done := make(chan error, reads)
	for i := 0; i < reads; i++ {
		go func() {
			_, err := f.ReadAt(make([]byte, 1), 0)
			done <- err
		}()
	}
	time.Sleep(500 * time.Millisecond)
	fmt.Printf("threads: %d before, %d with %d reads held\n", before, threads(), reads)
	fmt.Printf("f.SetDeadline(now): %v\n", f.SetDeadline(time.Now()))
	t := time.Now()
	err = f.Close()
	fmt.Printf("f.Close(): %v, after %v\n", err, time.Since(t).Round(time.Millisecond))
	for i := 0; i < reads; i++ {
		<-done
	}
	took := time.Since(start)
	fmt.Printf("the held reads answered %v after they started\n", took.Round(time.Millisecond))
	if took > 2*time.Second {
		os.Exit(1)
	}
}
