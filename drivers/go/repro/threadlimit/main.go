// Standalone reproducer: a Go program whose reads the storage holds dies of
// thread exhaustion. Each goroutine blocked in pread(2) keeps an OS thread;
// past debug.SetMaxThreads (10,000 by default; 40 here, to show it with 64
// reads) the runtime aborts the whole process.
//
//	cd drivers/go && slowfs run --set 'read hang=3s' -- go run ./repro/threadlimit
//
// Prints "runtime: program exceeds 40-thread limit" and "fatal error: thread
// exhaustion" (then every goroutine's stack) and exits 2, Go's status for a
// fatal error (`go run` reports it as "exit status 2" and exits 1).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
)

func main() {
	path := filepath.Join(os.Getenv("SLOWFS_MOUNT"), "data")
	if err := os.WriteFile(path, make([]byte, 4096), 0o644); err != nil {
		panic(err)
	}
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	debug.SetMaxThreads(40)
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.ReadAt(make([]byte, 1), 0)
		}()
	}
	wg.Wait()
	fmt.Println("64 held reads, and the process is alive")
}
