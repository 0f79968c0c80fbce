package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/rundir"
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
	// ssh are the --ssh-* flags (ssh.go).
	ssh sshOptions
}

// register defines the flags on fs, with harness.DefaultConfig's defaults.
func (o *runOptions) register(fs *flag.FlagSet) {
	def := harness.DefaultConfig()
	wl := def.Workload
	fs.StringVar(&o.recipe, "recipe", "gozk", "lock recipe under test: "+strings.Join(realRecipeNames(), ", ")+" (zlockcheck recipes describes them), or exec with --worker-cmd")
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
	fs.BoolVar(&o.baseline, "baseline", false, "after the workload, time a plain go-zookeeper lock loop on the same ensemble (benchmarks)")
	fs.BoolVar(&o.baselineProc, "baseline-processes", false, "after the workload (and --baseline's loop), time the plain loop as one OS process per worker slot, in its namespace, as the workers run (benchmarks)")
	fs.DurationVar(&o.cfg.BaselineWarmup, "baseline-warmup", def.BaselineWarmup, "with --baseline or --baseline-processes: first run the plain loop this long, untimed, so that the servers have warmed up before either side is timed (0: none)")
	fs.DurationVar(&o.cfg.NemesisInterval, "nemesis-interval", def.NemesisInterval, "mean quiet time between faults")
	fs.IntVar(&o.cfg.Nodes, "nodes", def.Nodes, "ZooKeeper servers in the ensemble")
	fs.IntVar(&o.cfg.Workers, "workers", def.Workers, "concurrent worker processes")
	fs.DurationVar(&o.cfg.Duration, "time", def.Duration, "how long the workload runs")
	fs.Int64Var(&o.cfg.Seed, "seed", 0, "seed of every random choice (0: pick one and print it)")
	fs.StringVar(&o.cfg.Store, "store", def.Store, "directory that keeps every run")
	fs.StringVar(&o.cfg.Name, "name", "", "test name (default RECIPE-WORKLOAD)")
	fs.StringVar(&o.cfg.ZKHome, "zk-home", "", "ZooKeeper install to use instead of Debian's zookeeper package")
	fs.DurationVar(&o.cfg.SessionTimeout, "session-timeout", def.SessionTimeout, "ZooKeeper session timeout of the workers")
	fs.DurationVar(&o.cfg.Tick, "tick", def.Tick, "servers' tickTime")
	fs.IntVar(&o.cfg.InitLimit, "init-limit", def.InitLimit, "servers' initLimit (ticks)")
	fs.StringVar(&o.cfg.ServerHeap, "server-heap", "", "JVM heap of each ZooKeeper server, e.g. 1g (default 256m)")
	fs.BoolVar(&o.cfg.ServerFullJIT, "server-full-jit", false, "let the servers' JVMs compile with C2 too (default: C1 only, which starts faster)")
	fs.BoolVar(&o.cfg.NoForceSync, "no-force-sync", false, "servers acknowledge writes before fsync (forceSync=no): a weaker durability model, for throughput experiments; recorded in config.json")
	fs.IntVar(&o.cfg.SyncLimit, "sync-limit", def.SyncLimit, "servers' syncLimit (ticks)")
	o.ssh.register(fs, true)
	o.registerConnect(fs)
}

// plan turns the options into a harness and a model configuration; it builds what a
// recipe's worker needs (the Curator classes) when missing.
func (o runOptions) plan(ctx context.Context, stderr io.Writer) (harness.Config, models.Config, error) {
	cfg := o.cfg
	cfg.Recipe = o.recipe
	var r recipes.Entry
	if o.recipe == "exec" {
		if o.workerCmd == "" {
			return cfg, models.Config{}, usageError{"--recipe exec needs --worker-cmd"}
		}
		// The shell splits the command as the user wrote it; exec keeps the worker's
		// pid the one the harness started (so kill and pause reach the worker itself).
		cfg.WorkerArgv = []string{"/bin/sh", "-c", "exec " + o.workerCmd}
	} else {
		if o.workerCmd != "" {
			return cfg, models.Config{}, usageError{"--worker-cmd goes with --recipe exec"}
		}
		var err error
		if r, err = recipes.Find(o.recipe); err != nil {
			return cfg, models.Config{}, fmt.Errorf("--recipe: %w", err)
		}
		if r.Mutant && !o.mutants {
			return cfg, models.Config{}, fmt.Errorf("--recipe: %s is a deliberately broken mutant; add --allow-mutants to run it", r.Name)
		}
	}
	workload := o.workload
	if workload == "" {
		workload = string(workloads.Mutex)
		if len(r.Kinds) > 0 {
			workload = string(r.Kinds[0])
		}
		if o.fenced {
			workload = string(workloads.Counter)
		}
	}
	kind, err := workloads.ParseKind(workload)
	if err != nil {
		return cfg, models.Config{}, fmt.Errorf("--workload: %w", err)
	}
	if r.Name != "" && !r.Supports(kind) {
		return cfg, models.Config{}, fmt.Errorf("--recipe %s does not do the %s workload (it does %v)", r.Name, kind, r.Kinds)
	}
	cfg.Workload = workloads.Config{Kind: kind, Permits: o.permits, AcquireTimeout: o.acquireTO, HoldMax: o.holdMax, ThinkMax: o.thinkMax, Fenced: o.fenced, WriteRetry: o.writeRetry, KeepAfterInfo: o.keepWorkers}
	if r.Name != "" {
		if cfg.WorkerArgv, err = workerArgv(ctx, r, stderr); err != nil {
			return cfg, models.Config{}, err
		}
		if o.workerCPUProfile != "" {
			if r.Runtime != recipes.InProcess {
				return cfg, models.Config{}, fmt.Errorf("--worker-cpuprofile: recipe %s is not served by zlockcheck worker (only Go recipes are profiled)", r.Name)
			}
			if err := os.MkdirAll(o.workerCPUProfile, 0o755); err != nil {
				return cfg, models.Config{}, fmt.Errorf("--worker-cpuprofile: %w", err)
			}
			dir, err := filepath.Abs(o.workerCPUProfile)
			if err != nil {
				return cfg, models.Config{}, fmt.Errorf("--worker-cpuprofile: %w", err)
			}
			cfg.WorkerArgv = append(cfg.WorkerArgv, "--cpuprofile", filepath.Join(dir, "worker-%p.pprof"))
		}
	}
	cfg.Baseline = o.baseline
	if o.baselineProc {
		self, err := os.Executable()
		if err != nil {
			return cfg, models.Config{}, fmt.Errorf("--baseline-processes: %w", err)
		}
		cfg.BaselineArgv = []string{self, "plain-loop"}
	}
	cfg.FinalPhase = o.final
	if cfg.Nemesis, err = nemesis.ParseClasses(o.nemesis); err != nil {
		return cfg, models.Config{}, fmt.Errorf("--nemesis: %w", err)
	}
	if cfg.ServerTargets, cfg.ClientTargets, err = nemesis.ParseTargets(o.targets); err != nil {
		return cfg, models.Config{}, fmt.Errorf("--nemesis-targets: %w", err)
	}
	if cfg.Shapes, err = nemesis.ParseShapes(o.shapes); err != nil {
		return cfg, models.Config{}, fmt.Errorf("--partition-shapes: %w", err)
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	if o.vary {
		cfg.Workload = o.varied(cfg.Workload, cfg.SessionTimeout, cfg.Nemesis)
	}
	if !o.quiet {
		cfg.Log = stderr
	}
	if cfg.SSH, err = o.ssh.config(o.set); err != nil {
		return cfg, models.Config{}, err
	}
	if cfg.SSH != nil && o.set["nodes"] && cfg.Nodes != len(cfg.SSH.Nodes) {
		return cfg, models.Config{}, usageError{fmt.Sprintf("--nodes %d but --ssh-nodes names %d nodes (one server each)", cfg.Nodes, len(cfg.SSH.Nodes))}
	}
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return cfg, models.Config{}, err
	}
	return cfg, models.Config{Kind: kind.Model(), Permits: cfg.Workload.Permits, Timeout: o.checkTO}, nil
}

// varied gives wl the standard regimes for these faults, with the knobs set by hand
// fixed in every regime.
func (o runOptions) varied(wl workloads.Config, sessionTimeout time.Duration, faults []nemesis.Class) workloads.Config {
	wl.Regimes = workloads.Fix(workloads.StandardRegimes(sessionTimeout, slices.ContainsFunc(faults, nemesis.Class.OnClients)), o.fixed())
	wl.RegimeLength = o.regimeLength
	return wl
}

// noteSet remembers which of fs's flags were given (on the command line or by a run
// file), so that a varying workload keeps them fixed.
func (o *runOptions) noteSet(fs *flag.FlagSet) {
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
}

// errRunBroke: the run broke down, though what it recorded checks valid.
var errRunBroke = errors.New("run did not complete cleanly (history checks valid)")

// execute runs cfg, then checks its stored history and writes the run's report.
func execute(ctx context.Context, cfg harness.Config, modelCfg models.Config, stderr io.Writer) (report.Results, error) {
	outcome, runErr := harness.Run(ctx, cfg)
	if outcome.History == "" {
		return report.Results{}, runErr
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "zlockcheck run: %v\n", runErr)
	}
	rc := runConfig(cfg)
	rc.RunID = outcome.RunID
	course := report.Course{
		Interrupted: outcome.Interrupted, Elapsed: outcome.Elapsed, ZooKeeperVersion: outcome.ZooKeeperVersion,
		RecipeVersion: recipeVersion(cfg.Recipe), SetupError: errString(runErr),
	}
	if outcome.Baseline != nil { // a nil *harness.Baseline in an any would not be nil
		course.Baseline = outcome.Baseline
	}
	if outcome.BaselineWarmup != nil {
		course.BaselineWarmup = outcome.BaselineWarmup
	}
	if outcome.BaselineProcesses != nil {
		course.BaselineProcesses = outcome.BaselineProcesses
	}
	run := report.NewRun(rundir.Dir(outcome.Dir), rc, cfg, course)
	res, err := report.CheckRun(run, modelCfg)
	if err != nil {
		return res, err
	}
	if runErr != nil && res.Verdict == models.Valid {
		// A run that broke down is not a pass, even if what it recorded checks.
		return res, errRunBroke
	}
	return res, nil
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
	suite, err := applyRunFile(fs, *file)
	if err != nil {
		return exitError, err
	}
	keep, err := parseKeep(o.keep)
	if err != nil {
		return exitError, fmt.Errorf("--keep: %w", err)
	}
	o.noteSet(fs)
	if suite != nil {
		return runSuite(ctx, fs, &o, *suite, keep, stdout, stderr)
	}
	cfg, modelCfg, err := o.plan(ctx, stderr)
	if err != nil {
		return exitError, err
	}
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return exitError, fmt.Errorf("--cpuprofile: %w", err)
		}
		defer stopProfile()
	}
	return runAndReport(ctx, cfg, modelCfg, runOutput{json: o.jsonOut, keep: keep}, stdout, stderr)
}

// runOutput says how a run's outcome is reported and kept.
type runOutput struct {
	// json prints results.json on stdout instead of the summary.
	json bool
	// keep decides whether a valid run's directory stays.
	keep keepPolicy
}

// runAndReport executes one planned run and prints its outcome: the summary, or with
// jsonOut results.json on stdout (the summary then goes to stderr).
func runAndReport(ctx context.Context, cfg harness.Config, modelCfg models.Config, out runOutput, stdout, stderr io.Writer) (int, error) {
	line := newStatusLine(stderr, cfg.Log != nil && cfg.Log != io.Discard)
	if line != nil {
		cfg.Progress = line.show
		// Progress lines of the log would break the status line: keep one of them.
		cfg.Log = line
	}
	res, err := execute(ctx, cfg, modelCfg, stderr)
	line.done()
	if res.Dir != "" {
		if out.json {
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
	if out.keep == keepFailed && res.Verdict == models.Valid {
		if err := rundir.Remove(cfg.Store, cfg.Name, rundir.Dir(res.Dir)); err != nil {
			return exitError, fmt.Errorf("--keep failed: removing %s: %w", res.Dir, err)
		}
		fmt.Fprintf(stderr, "valid: removed %s (--keep failed)\n", res.Dir)
	}
	return verdictCode(res.Verdict), nil
}

// writeResultsJSON prints results as indented JSON.
func writeResultsJSON(w io.Writer, res report.Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// runSuite runs every recipe × nemesis × seed of a suite with the other flags in
// common, prints a line per run and a table, and exits with the worst verdict.
func runSuite(ctx context.Context, fs *flag.FlagSet, o *runOptions, suite suiteSpec, keep keepPolicy, stdout, stderr io.Writer) (int, error) {
	runs := suite.runs()
	worst := exitValid
	type row struct {
		run     suiteRun
		verdict string
		dir     string
	}
	var rows []row
	for i, sr := range runs {
		if ctx.Err() != nil {
			break
		}
		for name, value := range map[string]string{"recipe": sr.recipe, "nemesis": sr.nemesis, "seed": strconv.FormatInt(sr.seed, 10)} {
			if value == "" || (name == "seed" && sr.seed == 0) {
				continue
			}
			if err := fs.Set(name, value); err != nil {
				return exitError, fmt.Errorf("suite run %d: %s: %w", i+1, name, err)
			}
		}
		fmt.Fprintf(stderr, "[%d/%d] %s, nemesis %s, seed %d\n", i+1, len(runs), o.recipe, o.nemesis, o.cfg.Seed)
		r := row{run: suiteRun{recipe: o.recipe, nemesis: o.nemesis, seed: o.cfg.Seed}}
		cfg, modelCfg, err := o.plan(ctx, stderr)
		code := exitError
		if err == nil {
			r.run.seed = cfg.Seed
			var res report.Results
			res, err = execute(ctx, cfg, modelCfg, stderr)
			r.dir = res.Dir
			if err == nil {
				code = verdictCode(res.Verdict)
				r.verdict = string(res.Verdict)
				if keep == keepFailed && res.Verdict == models.Valid {
					err = rundir.Remove(cfg.Store, cfg.Name, rundir.Dir(res.Dir))
					r.dir = "(removed: --keep failed)"
				}
			}
		}
		if err != nil {
			r.verdict = "error: " + err.Error()
		}
		worst = worseCode(worst, code)
		rows = append(rows, r)
	}
	if o.jsonOut {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			out = append(out, map[string]any{"recipe": r.run.recipe, "nemesis": r.run.nemesis, "seed": r.run.seed, "verdict": r.verdict, "dir": r.dir})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"runs": out, "exit_code": worst}); err != nil {
			return exitError, err
		}
	} else {
		fmt.Fprintf(stdout, "\n%-24s %-28s %-8s %s\n", "recipe", "nemesis", "seed", "verdict")
		for _, r := range rows {
			fmt.Fprintf(stdout, "%-24s %-28s %-8d %s  %s\n", r.run.recipe, r.run.nemesis, r.run.seed, r.verdict, r.dir)
		}
	}
	if ctx.Err() != nil {
		return exitError, fmt.Errorf("suite interrupted after %d of %d runs", len(rows), len(runs))
	}
	return worst, nil
}

// worseCode orders exit codes for a suite: error, then invalid, then unknown, then valid.
func worseCode(a, b int) int {
	rank := map[int]int{exitValid: 0, exitUnknown: 1, exitInvalid: 2, exitError: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
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
