package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/zksim"
	"github.com/zlockcheck/zlockcheck/zksim/tcprun"
)

// zksimCmd runs workers against the wire simulator's TCP server, with its fault
// rates: no ZooKeeper, no namespaces, no root. Exit codes as run's.
func zksimCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("zksim", stderr)
	recipe := fs.String("recipe", "", "a recipe of the catalogue (zlockcheck recipes), or exec with --worker-cmd (required)")
	workerCmd := fs.String("worker-cmd", "", "with --recipe exec: the worker program and its arguments")
	var srv zksim.ServerConfig
	fs.StringVar(&srv.Listen, "listen", "127.0.0.1:0", "the simulator's address")
	fs.Uint64Var(&srv.Seed, "seed", 1, "seeds the fault draws and the holds (a run is not reproducible: the workers race in real time)")
	fs.Float64Var(&srv.LoseReply, "lose-reply", 0.02, "per request: apply it, then close the connection before the reply")
	fs.Float64Var(&srv.Drop, "drop", 0.02, "per request or ping: close the connection before it is applied")
	fs.Float64Var(&srv.Stall, "stall", 0.01, "per request or ping: stop answering the connection until the client gives up on it")
	fs.Float64Var(&srv.ExpireStalled, "expire-stalled", 0, "per stall: also expire the session at once (the client hears of it when it reconnects)")
	cfg := tcprun.Config{Path: "/zlc/lock"}
	fs.IntVar(&cfg.Workers, "workers", 3, "workers cycling at once")
	fs.DurationVar(&cfg.Duration, "time", 30*time.Second, "how long they cycle")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 3*time.Second, "the session timeout sent in init")
	fs.DurationVar(&cfg.HoldMax, "hold-max", 500*time.Millisecond, "a hold lasts up to this long")
	fs.DurationVar(&cfg.AcquireTimeout, "acquire-timeout", 5*time.Second, "an acquire waits up to this long")
	historyFile := fs.String("history", "", "write the history (JSON Lines) to this file")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	argv, err := zksimWorker(ctx, *recipe, *workerCmd, stderr)
	if err != nil {
		return exitError, err
	}
	if err := srv.Validate(); err != nil {
		return exitError, usageError{err.Error()}
	}
	cfg.Argv, cfg.Seed, cfg.Connect = argv, srv.Seed, srv.Listen // Connect: the real address once listening
	if err := cfg.Validate(); err != nil {
		return exitError, usageError{err.Error()}
	}
	server, err := zksim.StartServer(srv)
	if err != nil {
		return exitError, err
	}
	cfg.Connect = server.Addr()
	fmt.Fprintf(stderr, "zksim: serving on %s; %d workers for %v\n", server.Addr(), cfg.Workers, cfg.Duration)
	res, err := tcprun.Run(ctx, cfg)
	server.Close()
	if err != nil {
		return exitError, err
	}
	if *historyFile != "" {
		if err := writeHistoryFile(*historyFile, res.History); err != nil {
			return exitError, err
		}
	}
	fmt.Fprintf(stdout, "%d ops, %d acquires ok, %d workers retired; faults injected: %v\n", len(res.History), res.Acquired, res.Retired, server.Faults())
	fmt.Fprintf(stdout, "verdict: %s\n", res.Check.Verdict)
	for _, k := range res.Check.Keys {
		if k.Witness != "" {
			fmt.Fprintf(stdout, "  %s\n", k.Witness)
		}
	}
	switch res.Check.Verdict {
	case models.Valid:
		return exitValid, nil
	case models.Invalid:
		return exitInvalid, nil
	}
	return exitUnknown, nil
}

// zksimWorker is the worker command of --recipe (or exec's --worker-cmd).
func zksimWorker(ctx context.Context, recipe, workerCmd string, stderr io.Writer) ([]string, error) {
	switch {
	case recipe == "":
		return nil, usageError{"--recipe is required"}
	case recipe == "exec" && workerCmd == "":
		return nil, usageError{"--recipe exec needs --worker-cmd"}
	case recipe == "exec":
		return []string{"/bin/sh", "-c", "exec " + workerCmd}, nil
	case workerCmd != "":
		return nil, usageError{"--worker-cmd goes with --recipe exec"}
	}
	entry, err := recipes.Find(recipe)
	if err != nil {
		return nil, usageError{"--recipe: " + err.Error()}
	}
	setup, err := workerSetup(stderr)
	if err != nil {
		return nil, err
	}
	return setup.Command(ctx, entry)
}

// writeHistoryFile writes h to path as JSON Lines.
func writeHistoryFile(path string, h histories.History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := histories.WriteJSONL(f, h); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
