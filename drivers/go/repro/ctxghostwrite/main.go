// Standalone reproducer: the context idiom around os.File.WriteAt (the call in
// a goroutine, a select on ctx.Done()) returns ctx.Err() when the context is
// done (here a 20 ms timeout: "context deadline exceeded") while the write
// goes on and lands.
//
//	cd drivers/go && slowfs run --set 'write delay=100ms' -- go run ./repro/ctxghostwrite
//
// Exits 1 when the "cancelled" byte is in the file.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// writeAt is how Go code gives a file write a context: os.File takes none.
func writeAt(ctx context.Context, f *os.File, b []byte, off int64) (int, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := f.WriteAt(b, off)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func main() {
	path := filepath.Join(os.Getenv("SLOWFS_MOUNT"), "data")
	if err := os.WriteFile(path, []byte("O"), 0o644); err != nil {
		panic(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = writeAt(ctx, f, []byte("N"), 0)
	fmt.Printf("writeAt returned %v after %v\n", err, time.Since(start).Round(time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	now, _ := os.ReadFile(path)
	if err != nil && string(now) == "N" {
		fmt.Println("300 ms later the file holds 'N': the cancelled write landed (ghost write)")
		os.Exit(1)
	}
	fmt.Printf("300 ms later the file holds %q\n", now)
}
