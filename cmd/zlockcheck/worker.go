package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/workloads"
)

func workerCmd(ctx context.Context, args []string, stderr io.Writer) (int, error) {
	fs := newFlagSet("worker", stderr)
	recipe := fs.String("recipe", "gozk", "recipe to serve")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) to this file; %p is replaced by ZLC_PROCESS")
	protocol := fs.Int("protocol", workloads.ProtocolVersion, "newest worker protocol version to speak (1: a v1 worker, whatever the harness offers)")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if os.Getenv("GOMAXPROCS") == "" {
		// One lock client needs one P: with more, every hand-over between its
		// goroutines (pipe reader, ZooKeeper send and receive loops) wakes another
		// thread, and with W worker processes on a few cores those wake-ups are most of
		// a worker's CPU (BENCHMARKS.md, issue 15). The environment still wins.
		runtime.GOMAXPROCS(1)
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(strings.ReplaceAll(*cpuProfile, "%p", os.Getenv("ZLC_PROCESS")))
		if err != nil {
			return exitError, fmt.Errorf("--cpuprofile: %w", err)
		}
		defer stop()
	}
	if err := recipes.Serve(ctx, recipes.ServeConfig{Recipe: *recipe, In: os.Stdin, Out: os.Stdout, Log: stderr, MaxProtocol: *protocol}); err != nil {
		return exitError, err
	}
	return 0, nil
}

// startCPUProfile starts a CPU profile into path; the returned func stops it and
// closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
