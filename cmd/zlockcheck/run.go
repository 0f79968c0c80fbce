package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/harness/suite"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// runOptions are the flags of `run` (and, less recipe/workload/nemesis, of `matrix`).
type runOptions struct {
	cfg        harness.Config
	recipe     string
	mutants    bool
	fenced     bool
	workerCmd  string
	workload   string
	permits    int
	acquireTO  time.Duration
	holdMax    time.Duration
	thinkMax   time.Duration
	writeRetry time.Duration
	// keepWorkers: Workload.KeepAfterInfo.
	keepWorkers bool
	// vary makes the workload vary itself through workloads.StandardRegimes, each
	// regimeLength long; the knobs in set (flags given by hand) stay fixed.
	vary         bool
	regimeLength time.Duration
	set          map[string]bool
	checkTO      time.Duration
	quiet        bool
	nemesis      string
	targets      string
	shapes       string
	final        bool
	baseline     bool
	baselineProc bool
	// cpuProfile and workerCPUProfile are pprof outputs (benchmarks): the harness's
	// process, and a directory for the Go workers' (one file per process).
	cpuProfile, workerCPUProfile string
	jsonOut                      bool
	keep                         string
	// noSweep is --no-sweep: leave what dead runs left (sweep.go).
	noSweep bool
	// ssh are the --ssh-* flags (ssh.go).
	ssh sshOptions
	// service is --service ("": the recipe's).
	service string
	// kinds are the flags of the kinds' own settings (kindflags.go).
	kinds kindFlags
	// manyKinds: the options are a matrix's base, whose rows take the settings of
	// their own kind (kindFlags.given); a run's config leaves Settings unset.
	manyKinds bool
	// setup, when set, is the run's faults instead of --nemesis, --nemesis-targets and
	// --partition-shapes (a matrix column).
	setup *nemesis.Setup
}

// register defines the flags on fs, with harness.DefaultConfig's defaults.
func (o *runOptions) register(fs *flag.FlagSet) {
	def := harness.DefaultConfig()
	wl := def.Workload
	fs.StringVar(&o.recipe, "recipe", "gozk", "lock recipe under test: "+strings.Join(recipes.RealNames(), ", ")+" (zlockcheck recipes describes them), or exec with --worker-cmd")
	fs.BoolVar(&o.mutants, "allow-mutants", false, "allow the deliberately broken mutants of zlc-mutex")
	fs.BoolVar(&o.fenced, "fenced", false, "counter workload: write only while the lock node exists (multi of check + setData)")
	fs.StringVar(&o.workerCmd, "worker-cmd", "", "with --recipe exec: the worker program and its arguments (speaks protocol v1 or v2)")
	fs.StringVar(&o.workload, "workload", "", "workload: mutex, semaphore, rwlock, reentrant, counter (default: the recipe's first)")
	fs.IntVar(&o.permits, "permits", 0, fmt.Sprintf("semaphore permits (semaphore workload only; default %d)", workloads.Semaphore.DefaultPermits()))
	fs.DurationVar(&o.acquireTO, "acquire-timeout", wl.AcquireTimeout, "how long a worker waits for the lock")
	fs.DurationVar(&o.holdMax, "hold-max", wl.HoldMax, "longest time a worker holds the lock")
	fs.DurationVar(&o.thinkMax, "think-max", 0, "longest random pause of a worker between lock cycles (lets --nemesis-targets idle aim at an acquire's first steps)")
	fs.BoolVar(&o.keepWorkers, "keep-workers", false, "a worker whose acquire or release ended with an unknown outcome goes on with the same process and session (a new process id in the history), as applications keep their lock clients; default: replace it")
	fs.BoolVar(&o.vary, "vary", false, "vary the workload during the run: acquire timeouts, holds, think times and the number of active workers are drawn per cycle from regimes that change every --regime-length (README: Exploring); --acquire-timeout, --hold-max and --think-max given by hand stay fixed")
	fs.DurationVar(&o.regimeLength, "regime-length", workloads.DefaultRegimeLength, "with --vary: how long each regime lasts")
	fs.DurationVar(&o.writeRetry, "write-retry", 0, "counter workload: how long a worker retries a write whose outcome is unknown (0: 2x the session timeout; negative: never)")
	fs.DurationVar(&o.checkTO, "check-timeout", models.DefaultTimeout, "budget of the linearizability search; past it the verdict is unknown")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&o.keep, "keep", "all", "runs to keep in the store: all, or failed (a valid run's directory is removed)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the final result (results.json) as JSON on stdout; the summary goes to stderr")
	fs.StringVar(&o.nemesis, "nemesis", "none", "fault classes to inject, comma-separated, or none or all (see README)")
	fs.StringVar(&o.targets, "nemesis-targets", "", "restrict fault targets: some of one,leader,minority,majority,all (servers) and random,holder,idle,waiter (clients); default any")
	fs.StringVar(&o.shapes, "partition-shapes", "", "restrict partition shapes, e.g. isolate-leader,isolate-follower-quorum; default any")
	fs.BoolVar(&o.final, "final-phase", def.FinalPhase, "after healing, every worker must acquire once (liveness)")
	fs.DurationVar(&o.cfg.OrphanAfter, "orphan-after", 0, "call the lowest lock node a blocking orphan when its live session's worker holds nothing and asks for nothing, or waits behind it with a newer node, for this long: ends the workload early, and the final phase at once (0: the session timeout; negative: never)")
	fs.DurationVar(&o.cfg.StallAfter, "stall-after", 0, "end the workload early for the final phase when workers kept trying and none acquired for this long (0: longest fault hold + final bound; negative: never)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the harness's CPU profile (pprof) to this file")
	fs.StringVar(&o.workerCPUProfile, "worker-cpuprofile", "", "write each Go worker's CPU profile (pprof) into this directory, as worker-PROCESS.pprof")
	fs.BoolVar(&o.baseline, "baseline", false, "after the workload, time a plain client lock loop on the same servers (go-zookeeper; Redis: SET NX PX and compare-and-delete) (benchmarks)")
	fs.BoolVar(&o.baselineProc, "baseline-processes", false, "after the workload (and --baseline's loop), time the plain loop as one OS process per worker slot, in its namespace, as the workers run (benchmarks)")
	fs.DurationVar(&o.cfg.BaselineWarmup, "baseline-warmup", def.BaselineWarmup, "with --baseline or --baseline-processes: first run the plain loop this long, untimed, so that the servers have warmed up before either side is timed (0: none)")
	fs.DurationVar(&o.cfg.NemesisInterval, "nemesis-interval", def.NemesisInterval, "mean quiet time between faults")
	fs.DurationVar(&o.cfg.ClientHold, "client-hold", 0, "hold each client-partition, client-pause, reply-loss and connection-reset this long (0: about twice the session timeout for the first two, so the session expires, 0.85 of it for reply-loss, a quarter for connection-reset; shorter than a session, a cut-off client drops its connection and gets its session back, what it sent meanwhile lost)")
	fs.StringVar(&o.service, "service", "", "lock service the run starts: "+kind.Names()+" (default: the recipe's; zookeeper for exec); docs/redis.md, docs/databases.md")
	fs.IntVar(&o.cfg.Nodes, "nodes", def.Nodes, "servers: ZooKeeper's voting servers, Redis instances, PostgreSQL's primary and standby, MariaDB's independent servers (default: the service's own; 3 for ZooKeeper, 1 for --redis-topology single, else 3)")
	fs.IntVar(&o.cfg.Workers, "workers", def.Workers, "concurrent worker processes")
	fs.DurationVar(&o.cfg.Duration, "time", def.Duration, "how long the workload runs")
	fs.Int64Var(&o.cfg.Seed, "seed", 0, "seed of every random choice (0: pick one and print it)")
	fs.StringVar(&o.cfg.Store, "store", def.Store, "directory that keeps every run")
	fs.StringVar(&o.cfg.Name, "name", "", "test name (default RECIPE-WORKLOAD)")
	fs.DurationVar(&o.cfg.SessionTimeout, "session-timeout", def.SessionTimeout, "session timeout the workers ask for: ZooKeeper's session timeout, Redis's lock TTL, a database lock's heartbeat bound or expiry")
	o.kinds.register(fs)
	o.ssh.register(fs, true)
	o.registerConnect(fs)
	fs.BoolVar(&o.noSweep, "no-sweep", false, noSweepUsage)
}

// sweep is sweepDead for the options' SSH nodes (the error is a bad --ssh-* flag).
func (o runOptions) sweep(ctx context.Context, stderr io.Writer) error {
	nodes, err := o.ssh.config(o.set)
	if err != nil {
		return err
	}
	sweepDead(ctx, o.noSweep, nodes, stderr)
	return nil
}

// config turns the options into the run's configuration: the flags' half of it. The
// library completes the rest once per run (harness.Config.Resolve: the workload's
// default kind, the recipe's checks and worker command; Defaults; Validate).
func (o runOptions) config(stderr io.Writer) (harness.Config, error) {
	cfg := o.cfg
	cfg.Recipe = o.recipe
	if err := o.serviceConfig(&cfg); err != nil {
		return cfg, err
	}
	if o.set["workers"] && cfg.Workers < 1 { // unset, the library's 0 is its default of 5
		return cfg, usageError{fmt.Sprintf("--workers: want 1 to 250, got %d", cfg.Workers)}
	}
	var err error
	if cfg.WorkerArgv, cfg.Worker, err = o.worker(stderr); err != nil {
		return cfg, err
	}
	var kind workloads.Kind
	if o.workload != "" {
		if kind, err = workloads.ParseKind(o.workload); err != nil {
			return cfg, fmt.Errorf("--workload: %w", err)
		}
	}
	cfg.Workload = workloads.Config{Kind: kind, Permits: o.permits, AcquireTimeout: o.acquireTO, HoldMax: o.holdMax, ThinkMax: o.thinkMax, Fenced: o.fenced, WriteRetry: o.writeRetry, KeepAfterInfo: o.keepWorkers}
	cfg.Check.Timeout = o.checkTO
	cfg.Baseline = o.baseline
	if o.baselineProc {
		self, err := os.Executable()
		if err != nil {
			return cfg, fmt.Errorf("--baseline-processes: %w", err)
		}
		cfg.BaselineArgv = []string{self, "plain-loop"}
	}
	cfg.FinalPhase = o.final
	faults, err := o.faults()
	if err != nil {
		return cfg, err
	}
	cfg = cfg.WithSetup(faults)
	if o.vary {
		cfg.Workload.Vary, cfg.Workload.Fixed, cfg.Workload.RegimeLength = true, o.fixed(), o.regimeLength
	}
	if !o.quiet {
		cfg.Log = stderr
	}
	if cfg.SSH, err = o.ssh.config(o.set); err != nil {
		return cfg, err
	}
	if cfg.SSH != nil && o.set["nodes"] && cfg.Servers() != len(cfg.SSH.Nodes) {
		given := fmt.Sprintf("--nodes %d", cfg.Nodes)
		if cfg.Servers() != cfg.Nodes {
			given += fmt.Sprintf(" (%d servers in all)", cfg.Servers())
		}
		return cfg, usageError{fmt.Sprintf("%s but --ssh-nodes names %d nodes (one server each)", given, len(cfg.SSH.Nodes))}
	}
	return cfg, nil
}

// serviceConfig sets the run's service and its kind's settings from the flags; a
// --nodes not given is left to the kind (harness.Config.Defaults).
func (o runOptions) serviceConfig(cfg *harness.Config) error {
	var err error
	if o.service != "" {
		if cfg.Service, err = kind.Parse(o.service); err != nil {
			return usageError{"--service: " + err.Error()}
		}
	}
	if !o.manyKinds {
		n := cfg.Service
		if n == "" {
			n = harness.RecipeService(o.recipe) // "": exec, on the default kind
		}
		if cfg.Settings, err = o.kinds.forKind(n, o.set); err != nil {
			return err
		}
	}
	if !o.set["nodes"] {
		cfg.Nodes = 0 // the service's own number (harness.Config.Defaults)
	}
	return nil
}

// plan is the run the options make, completed and checked without running it
// (harness.Config.Prepare).
func (o runOptions) plan(ctx context.Context, stderr io.Writer) (harness.Config, error) {
	cfg, err := o.config(stderr)
	if err != nil {
		return cfg, err
	}
	return cfg.Prepare(ctx)
}

// worker is the worker command of --recipe exec, or how the library builds a
// catalogue recipe's (harness.WorkerSetup): the Java and Python workers are unpacked
// (and the Curator worker compiled) into $ZLC_CACHE_DIR, by default the user's cache
// directory, on first use.
func (o runOptions) worker(stderr io.Writer) ([]string, harness.WorkerSetup, error) {
	if o.recipe == "exec" {
		if o.workerCmd == "" {
			return nil, harness.WorkerSetup{}, usageError{"--recipe exec needs --worker-cmd"}
		}
		// The shell splits the command as the user wrote it; exec keeps the worker's
		// pid the one the harness started (so kill and pause reach the worker itself).
		return []string{"/bin/sh", "-c", "exec " + o.workerCmd}, harness.WorkerSetup{}, nil
	}
	if o.workerCmd != "" {
		return nil, harness.WorkerSetup{}, usageError{"--worker-cmd goes with --recipe exec"}
	}
	w, err := workerSetup(stderr)
	w.AllowMutants, w.CPUProfileDir = o.mutants, o.workerCPUProfile
	return nil, w, err
}

// workerSetup is how this binary's recipes get their worker command: Go recipes are
// served by this binary (`zlockcheck worker`).
func workerSetup(stderr io.Writer) (harness.WorkerSetup, error) {
	self, err := os.Executable()
	return harness.WorkerSetup{Self: self, CacheDir: os.Getenv("ZLC_CACHE_DIR"), JavaDir: os.Getenv("ZLC_JAVA_DIR"), Log: stderr}, err
}

// faults is the run's fault setup: the matrix's column, or the --nemesis flags'.
func (o runOptions) faults() (nemesis.Setup, error) {
	if o.setup != nil {
		return *o.setup, nil
	}
	var s nemesis.Setup
	var err error
	if s.Classes, err = nemesis.ParseClasses(o.nemesis); err != nil {
		return s, fmt.Errorf("--nemesis: %w", err)
	}
	if s.ServerTargets, s.ClientTargets, err = nemesis.ParseTargets(o.targets); err != nil {
		return s, fmt.Errorf("--nemesis-targets: %w", err)
	}
	if s.Shapes, err = nemesis.ParseShapes(o.shapes); err != nil {
		return s, fmt.Errorf("--partition-shapes: %w", err)
	}
	return s, nil
}

// noteSet remembers which of fs's flags were given (on the command line or by a run
// file), so that a varying workload keeps them fixed.
func (o *runOptions) noteSet(fs *flag.FlagSet) {
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("run", stderr)
	var o runOptions
	o.register(fs)
	file := fs.String("f", "", "read the run's flags from this YAML file (keys: flag names; a suite section runs many); the command line wins")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	spec, err := applyRunFile(fs, *file)
	if err != nil {
		return exitError, err
	}
	keep, err := harness.ParseKeep(o.keep)
	if err != nil {
		return exitError, fmt.Errorf("--keep: %w", err)
	}
	o.noteSet(fs)
	if err := o.sweep(ctx, stderr); err != nil {
		return exitError, err
	}
	if spec != nil {
		return runSuite(ctx, &o, *spec, keep, stdout, stderr)
	}
	cfg, err := o.config(stderr)
	if err != nil {
		return exitError, err
	}
	cfg.Keep = keep
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return exitError, fmt.Errorf("--cpuprofile: %w", err)
		}
		defer stopProfile()
	}
	return runAndReport(ctx, cfg, o.jsonOut, stdout, stderr)
}

// runAndReport tests cfg and prints its outcome: the summary, or with jsonOut
// results.json on stdout (the summary then goes to stderr).
func runAndReport(ctx context.Context, cfg harness.Config, jsonOut bool, stdout, stderr io.Writer) (int, error) {
	line := newStatusLine(stderr, cfg.Log != nil && cfg.Log != io.Discard)
	if line != nil {
		cfg.Progress = line.show
		// Progress lines of the log would break the status line: keep one of them.
		cfg.Log = line
	}
	t, err := test(ctx, cfg, stderr)
	line.done()
	res := t.Results
	if res.Dir != "" {
		if jsonOut {
			report.Summary(stderr, res)
			if jerr := writeResultsJSON(stdout, res); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			report.Summary(stdout, res)
		}
	}
	if err != nil {
		return exitError, err
	}
	if t.Removed {
		fmt.Fprintf(stderr, "valid: removed %s (--keep failed)\n", res.Dir)
	}
	return verdictCode(res.Verdict), nil
}

// test is harness.Test, saying on stderr why a run broke down whose history was
// checked anyway.
func test(ctx context.Context, cfg harness.Config, stderr io.Writer) (harness.TestResult, error) {
	t, err := harness.Test(ctx, cfg)
	if t.RunErr != nil && t.Results.Dir != "" {
		fmt.Fprintf(stderr, "zlockcheck run: %v\n", t.RunErr)
	}
	return t, err
}

// writeResultsJSON prints results as indented JSON.
func writeResultsJSON(w io.Writer, res report.Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// runSuite runs every recipe × nemesis × seed of a suite with the other flags in
// common (harness/suite), prints a line per run and a table, and exits with the
// worst verdict.
func runSuite(ctx context.Context, o *runOptions, spec suite.Spec, keep harness.Keep, stdout, stderr io.Writer) (int, error) {
	o.manyKinds = true // each run's settings are its recipe's kind's (suite.Plan.Config)
	base, err := o.config(stderr)
	if err != nil {
		return exitError, err
	}
	base.Keep = keep
	given, err := o.kinds.given(o.set)
	if err != nil {
		return exitError, err
	}
	plan := suite.Plan{Base: base, Given: given, Runs: spec.Runs()}
	rows, worst := plan.Run(ctx, stderr)
	if err := printSuite(stdout, rows, worst, o.jsonOut); err != nil {
		return exitError, err
	}
	if ctx.Err() != nil {
		return exitError, fmt.Errorf("suite interrupted after %d of %d runs", len(rows), len(plan.Runs))
	}
	return verdictCode(worst), nil
}

// printSuite prints a suite's runs: a table, or with jsonOut JSON with the exit code.
func printSuite(stdout io.Writer, rows []suite.Row, worst models.Verdict, jsonOut bool) error {
	if jsonOut {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			out = append(out, map[string]any{"recipe": r.Run.Recipe, "nemesis": r.Run.Nemesis, "seed": r.Run.Seed, "verdict": suiteText(r), "dir": suiteDir(r)})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"runs": out, "exit_code": verdictCode(worst)})
	}
	fmt.Fprintf(stdout, "\n%-24s %-28s %-8s %s\n", "recipe", "nemesis", "seed", "verdict")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-24s %-28s %-8d %s  %s\n", r.Run.Recipe, r.Run.Nemesis, r.Run.Seed, suiteText(r), suiteDir(r))
	}
	return nil
}

// suiteText is a row's verdict as the suite's table shows it.
func suiteText(r suite.Row) string {
	if r.Note != "" {
		return r.Note
	}
	return string(r.Verdict)
}

// suiteDir is a row's directory as the suite's table shows it.
func suiteDir(r suite.Row) string {
	if r.Removed {
		return "(removed: --keep failed)"
	}
	return r.Dir
}

// verdictCode is the exit code of a verdict.
func verdictCode(v models.Verdict) int {
	switch v {
	case models.Valid:
		return exitValid
	case models.Invalid:
		return exitInvalid
	case models.Error:
		return exitError
	}
	return exitUnknown
}
