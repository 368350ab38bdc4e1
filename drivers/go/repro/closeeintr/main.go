// Standalone reproducer: os.File.Close fails with EINTR on a FUSE filesystem
// that ends interrupted requests. close(2) waits for FUSE's FLUSH; Go's
// preemption signal (SIGURG, since Go 1.14) can land on the thread meanwhile,
// and Go retries EINTR around pread, pwrite, fsync and open but not around
// close (golang/go#44964).
//
//	cd drivers/go && slowfs run --set '* delay=100ms' -- go run ./repro/closeeintr
//	cd drivers/go && GODEBUG=asyncpreemptoff=1 slowfs run --set '* delay=100ms' -- go run ./repro/closeeintr
//
// (slowfs ends a held request whose thread gets a signal with a handler, like
// NFS's old `intr`; `slowfs run --no-intr` does not.) 16 goroutines each open
// a file 3 times, write, read and fsync it, and close it. Exits 1 when a
// Close failed with EINTR.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

func main() {
	dir := os.Getenv("SLOWFS_MOUNT")
	var wg sync.WaitGroup
	var mu sync.Mutex
	closes, eintr := 0, 0
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f-%d", g)), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					panic(err)
				}
				buf := make([]byte, 4096)
				for r := 0; r < 4; r++ {
					if _, err := f.WriteAt(buf, int64(r)*4096); err != nil {
						panic(err)
					}
					if _, err := f.ReadAt(buf, 0); err != nil {
						panic(err)
					}
					if r%2 == 1 {
						if err := f.Sync(); err != nil {
							panic(err)
						}
					}
				}
				err = f.Close()
				mu.Lock()
				closes++
				if errors.Is(err, syscall.EINTR) {
					eintr++
				} else if err != nil {
					panic(err)
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	fmt.Printf("%d of %d f.Close() calls failed with EINTR (%v)\n", eintr, closes, syscall.EINTR)
	if eintr > 0 {
		os.Exit(1)
	}
}
