package benchsuite

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/waggle-os/core/services/waggle/app"
)

// ProfileServe runs the waggle app like `waggle serve` (args are its
// flags after `-dir DIR --`) and profiles it on request: SIGUSR1 starts
// profile k (k = 1, 2, …): a CPU profile and an allocation snapshot, then
// it creates DIR/k.started; SIGUSR2 stops it, writing DIR/cpu-k.pprof,
// DIR/allocs-k-base.pprof and DIR/allocs-k.pprof (compare the two with
// `go tool pprof -base`). SIGTERM stops the app. It returns the exit code.
func ProfileServe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("profile-serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory for the profiles")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "profile-serve: -dir is required")
		return 2
	}
	cfg, err := app.ParseServe(fs.Args(), os.LookupEnv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "profile-serve: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	a := app.New(cfg, log)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = a.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "profile-serve: %v\n", err)
		return 1
	}
	k := 0
	var cpu *os.File
	for sig := range sigs {
		switch sig {
		case syscall.SIGUSR1:
			if cpu != nil {
				continue
			}
			k++
			if cpu, err = startProfile(*dir, k); err != nil {
				fmt.Fprintf(stderr, "profile-serve: %v\n", err)
				cpu = nil
			}
		case syscall.SIGUSR2:
			if cpu == nil {
				continue
			}
			if err := stopProfile(*dir, k, cpu); err != nil {
				fmt.Fprintf(stderr, "profile-serve: %v\n", err)
			}
			cpu = nil
		default:
			if cpu != nil {
				pprof.StopCPUProfile()
				cpu.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			err := a.Stop(ctx)
			cancel()
			if err != nil {
				fmt.Fprintf(stderr, "profile-serve: stop: %v\n", err)
				return 1
			}
			return 0
		}
	}
	return 0
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// The allocs profile counts every allocation since start; two
	// snapshots bracket one load phase.
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}

func startProfile(dir string, k int) (*os.File, error) {
	if err := writeHeap(filepath.Join(dir, fmt.Sprintf("allocs-%d-base.pprof", k))); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", k)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.started", k)), nil, 0o644)
}

func stopProfile(dir string, k int, cpu *os.File) error {
	pprof.StopCPUProfile()
	err := cpu.Close()
	return errors.Join(err, writeHeap(filepath.Join(dir, fmt.Sprintf("allocs-%d.pprof", k))),
		writeHeld(dir, k),
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.stopped", k)), nil, 0o644))
}

// writeHeld writes what the process holds at the end of profile k: the
// heap after a collection (heap-k.pprof: live objects only, where the
// allocs snapshot's inuse numbers are as of the last automatic cycle and
// include garbage of a burst), the goroutines (goroutine-k.txt, grouped
// by stack) and the runtime's memory statistics (memstats-k.txt: heap,
// stacks, what was returned to the OS), which tell RSS apart from heap.
func writeHeld(dir string, k int) error {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	stats := fmt.Sprintf("goroutines %d\nHeapAlloc %d\nHeapInuse %d\nHeapIdle %d\nHeapReleased %d\nStackInuse %d\nMSpanInuse %d\nGCSys %d\nOtherSys %d\nSys %d\nNextGC %d\nNumGC %d\n",
		runtime.NumGoroutine(), ms.HeapAlloc, ms.HeapInuse, ms.HeapIdle, ms.HeapReleased, ms.StackInuse,
		ms.MSpanInuse, ms.GCSys, ms.OtherSys, ms.Sys, ms.NextGC, ms.NumGC)
	heap, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", k)))
	if err != nil {
		return err
	}
	err = errors.Join(pprof.Lookup("heap").WriteTo(heap, 0), heap.Close())
	g, gerr := os.Create(filepath.Join(dir, fmt.Sprintf("goroutine-%d.txt", k)))
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	return errors.Join(err, pprof.Lookup("goroutine").WriteTo(g, 1), g.Close(),
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("memstats-%d.txt", k)), []byte(stats), 0o644))
}
