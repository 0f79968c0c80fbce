package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
)

// plainLoopCmd is `zlockcheck plain-loop`: one process of run --baseline-processes,
// started by the harness in a worker slot's namespace. It runs a plain go-zookeeper
// lock loop on one session from --start-unix-ns for --duration and prints what it
// achieved as one JSON line (lockservice.Baseline).
func plainLoopCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("plain-loop", stderr)
	connect := fs.String("connect", "", "the ensemble's client addresses, comma-separated")
	path := fs.String("path", "", "the lock node")
	sessionTimeout := fs.Duration("session-timeout", 4*time.Second, "the session's timeout")
	start := fs.Int64("start-unix-ns", 0, "when the loop starts (Unix ns; 0: now)")
	duration := fs.Duration("duration", 0, "how long the loop runs")
	holdMin := fs.Duration("hold-min", time.Millisecond, "shortest hold")
	holdMax := fs.Duration("hold-max", time.Millisecond, "longest hold")
	seed := fs.Uint64("seed", 1, "seed of the hold times")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1) // as a worker runs (worker.go)
	}
	at := time.Now()
	if *start > 0 {
		at = time.Unix(0, *start)
	}
	b, err := zookeeper.PlainLoop(ctx, zookeeper.PlainLoopConfig{
		Servers: strings.Split(*connect, ","), Path: *path, SessionTimeout: *sessionTimeout,
		Start: at, Duration: *duration, HoldMin: *holdMin, HoldMax: *holdMax, Seed: *seed,
	})
	if err != nil {
		return exitError, err
	}
	return 0, json.NewEncoder(stdout).Encode(b)
}
