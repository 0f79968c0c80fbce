package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/workloads"
)

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("run", stderr)
	var (
		cfg       harness.Config
		recipe    = fs.String("recipe", "gozk", "lock recipe under test (zlockcheck recipes lists them), or exec with --worker-cmd")
		mutants   = fs.Bool("allow-mutants", false, "allow the deliberately broken mutants of zlc-mutex")
		fenced    = fs.Bool("fenced", false, "counter workload: write only while the lock node exists (multi of check + setData)")
		workerCmd = fs.String("worker-cmd", "", "with --recipe exec: the worker program and its arguments (speaks protocol v1)")
		workload  = fs.String("workload", "mutex", "workload: mutex, semaphore, rwlock, reentrant, counter")
		permits   = fs.Int("permits", 0, "semaphore permits (semaphore workload only; default 1)")
		acquireTO = fs.Duration("acquire-timeout", 2*time.Second, "how long a worker waits for the lock")
		holdMax   = fs.Duration("hold-max", 50*time.Millisecond, "longest time a worker holds the lock")
		checkTO   = fs.Duration("check-timeout", 60*time.Second, "budget of the linearizability search; past it the verdict is unknown")
		quiet     = fs.Bool("quiet", false, "no progress lines on stderr")
		nemesisF  = fs.String("nemesis", "none", "fault classes to inject, comma-separated, or none or all (see README)")
		targetsF  = fs.String("nemesis-targets", "", "restrict fault targets: some of one,leader,minority,majority,all (servers) and random,holder (clients); default any")
		shapesF   = fs.String("partition-shapes", "", "restrict partition shapes, e.g. isolate-leader,isolate-follower-quorum; default any")
		finalF    = fs.Bool("final-phase", true, "after healing, every worker must acquire once (liveness)")
		baseline  = fs.Bool("baseline", false, "after the workload, time a plain go-zookeeper lock loop on the same ensemble (benchmarks)")
	)
	fs.DurationVar(&cfg.NemesisInterval, "nemesis-interval", 10*time.Second, "mean quiet time between faults")
	fs.IntVar(&cfg.Nodes, "nodes", 3, "ZooKeeper servers in the ensemble")
	fs.IntVar(&cfg.Workers, "workers", 5, "concurrent worker processes")
	fs.DurationVar(&cfg.Duration, "time", 30*time.Second, "how long the workload runs")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of every random choice (0: pick one and print it)")
	fs.StringVar(&cfg.Store, "store", "store", "directory that keeps every run")
	fs.StringVar(&cfg.Name, "name", "", "test name (default RECIPE-WORKLOAD)")
	fs.StringVar(&cfg.ZKHome, "zk-home", "", "ZooKeeper install to use instead of Debian's zookeeper package")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", harness.DefaultSessionTimeout, "ZooKeeper session timeout of the workers")
	fs.DurationVar(&cfg.Tick, "tick", harness.DefaultTick, "servers' tickTime")
	fs.IntVar(&cfg.InitLimit, "init-limit", harness.DefaultInitLimit, "servers' initLimit (ticks)")
	fs.IntVar(&cfg.SyncLimit, "sync-limit", harness.DefaultSyncLimit, "servers' syncLimit (ticks)")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	kind, err := workloads.ParseKind(*workload)
	if err != nil {
		return exitError, fmt.Errorf("--workload: %w", err)
	}
	cfg.Workload = workloads.Config{Kind: kind, Permits: *permits, AcquireTimeout: *acquireTO, HoldMax: *holdMax, Fenced: *fenced}
	if *holdMax > 0 {
		cfg.Workload.HoldMin = min(time.Millisecond, *holdMax)
	}
	cfg.Recipe = *recipe
	if *recipe == "exec" {
		if *workerCmd == "" {
			return exitError, usageError{"--recipe exec needs --worker-cmd"}
		}
		// The shell splits the command as the user wrote it; exec keeps the worker's
		// pid the one the harness started (so kill and pause reach the worker itself).
		cfg.WorkerArgv = []string{"/bin/sh", "-c", "exec " + *workerCmd}
	} else {
		if *workerCmd != "" {
			return exitError, usageError{"--worker-cmd goes with --recipe exec"}
		}
		r, err := findRecipe(*recipe)
		if err != nil {
			return exitError, fmt.Errorf("--recipe: %w", err)
		}
		if r.mutant && !*mutants {
			return exitError, fmt.Errorf("--recipe: %s is a deliberately broken mutant; add --allow-mutants to run it", r.name)
		}
		if !slices.Contains(r.kinds, kind) {
			return exitError, fmt.Errorf("--recipe %s does not do the %s workload (it does %v)", r.name, kind, r.kinds)
		}
		self, err := os.Executable()
		if err != nil {
			return exitError, err
		}
		root := projectRoot()
		if r.prepare != nil {
			if err := r.prepare(ctx, root, stderr); err != nil {
				return exitError, err
			}
		}
		cfg.WorkerArgv = r.argv(self, root)
	}
	cfg.Baseline = *baseline
	cfg.FinalPhase = *finalF
	classes, err := nemesis.ParseClasses(*nemesisF)
	if err != nil {
		return exitError, fmt.Errorf("--nemesis: %w", err)
	}
	cfg.Nemesis = classes
	if cfg.ServerTargets, cfg.ClientTargets, err = nemesis.ParseTargets(*targetsF); err != nil {
		return exitError, fmt.Errorf("--nemesis-targets: %w", err)
	}
	if cfg.Shapes, err = nemesis.ParseShapes(*shapesF); err != nil {
		return exitError, fmt.Errorf("--partition-shapes: %w", err)
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	if !*quiet {
		cfg.Log = stderr
	}
	outcome, runErr := harness.Run(ctx, cfg)
	if outcome.History == "" {
		return exitError, runErr
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "zlockcheck run: %v\n", runErr)
	}
	cfg = cfg.Defaults()
	modelCfg := models.Config{Kind: modelFor(cfg.Workload.Kind), Permits: cfg.Workload.Permits, Timeout: *checkTO}
	run := report.Run{
		Dir: outcome.Dir, History: outcome.History, Test: cfg.Name, RunID: outcome.RunID, Recipe: cfg.Recipe,
		Seed: cfg.Seed, Config: cfg, Interrupted: outcome.Interrupted, Elapsed: outcome.Elapsed,
		ZooKeeperVersion: outcome.ZooKeeperVersion, SetupError: errString(runErr),
	}
	if outcome.Baseline != nil {
		run.Baseline = outcome.Baseline
	}
	res, err := report.CheckRun(run, modelCfg)
	if err != nil {
		return exitError, err
	}
	report.Summary(stdout, res)
	if runErr != nil && res.Verdict == models.Valid {
		// A run that broke down is not a pass, even if what it recorded checks.
		return exitError, fmt.Errorf("run did not complete cleanly (history checks valid)")
	}
	return verdictCode(res.Verdict), nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// modelFor maps a workload to the model that checks it.
func modelFor(k workloads.Kind) models.Kind {
	switch k {
	case workloads.Semaphore:
		return models.Semaphore
	case workloads.RWLock:
		return models.RWLock
	}
	return models.Mutex
}

func verdictCode(v models.Verdict) int {
	switch v {
	case models.Valid:
		return exitValid
	case models.Invalid:
		return exitInvalid
	}
	return exitUnknown
}
