package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/rundir"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// A test is a run, the check of the history it recorded, and the keeping of its
// directory: Test does the three, for `run`, suites, the matrix and explore's rounds
// alike. How the history is judged is the run's own (Config.Check, in config.json), so
// that a stored run is judged again the same way (OpenRun, StoredRun.Recheck).

// ErrRunBroke is Test's error for a run that broke down (TestResult.RunErr says how)
// though what it recorded checks valid: a run that broke down is not a pass.
var ErrRunBroke = errors.New("run did not complete cleanly (history checks valid)")

// Keep says which tests' run directories stay in the store.
type Keep string

// The keep policies.
const (
	// KeepAll keeps every run's directory (the zero Keep does too).
	KeepAll Keep = "all"
	// KeepFailed removes the directory of a run whose verdict is valid.
	KeepFailed Keep = "failed"
)

// ParseKeep reads a keep policy: all or failed.
func ParseKeep(s string) (Keep, error) {
	switch Keep(s) {
	case KeepAll, KeepFailed:
		return Keep(s), nil
	}
	return "", fmt.Errorf("want all or failed, got %q", s)
}

// WorkerSetup says how Resolve builds the worker command of a recipe of the catalogue
// (recipes.Entry.Command) when Config.WorkerArgv is empty.
type WorkerSetup struct {
	// Self is the zlockcheck binary, which serves the Go recipes (`zlockcheck worker`).
	Self string
	// CacheDir is where the Java and Python workers are unpacked and built; "" is the
	// user's cache directory (maven.CacheDir; the CLI passes $ZLC_CACHE_DIR).
	CacheDir string
	// JavaDir holds Debian's jars; "" is /usr/share/java (the CLI passes $ZLC_JAVA_DIR).
	JavaDir string
	// Log receives progress (compiling the Curator worker); nil discards it.
	Log io.Writer
	// AllowMutants lets a deliberately broken mutant of zlc-mutex run.
	AllowMutants bool
	// CPUProfileDir, when set, is where each Go worker writes its CPU profile (pprof),
	// as worker-PROCESS.pprof; it is made if missing.
	CPUProfileDir string
}

// TestResult is what Test did.
type TestResult struct {
	// Config is the run's configuration as its config.json records it (defaults
	// applied, its run id set); as far as Test completed it when the run never started.
	Config Config
	// Results is the run's results.json; its Dir is empty when the run left no history.
	Results report.Results
	// RunErr is why the run broke down, if it did; its history, if any, was checked.
	RunErr error
	// Removed is set when Config.Keep removed the run's directory.
	Removed bool
}

// Test runs cfg (Resolve, then Run), checks the history it recorded with the run's
// Config.Check (report.CheckRun, which writes results.json and the report files into
// the run's directory), and removes the directory if cfg.Keep says so. The error is
// Resolve's or Run's when there is no history to check, the check's, ErrRunBroke, or
// the removal's; a run that broke down after recording a history is checked anyway.
func Test(ctx context.Context, cfg Config) (TestResult, error) {
	cfg, err := cfg.Resolve(ctx)
	t := TestResult{Config: cfg}
	if err != nil {
		return t, err
	}
	out, runErr := Run(ctx, cfg)
	t.RunErr = runErr
	if out.History == "" {
		return t, runErr
	}
	sr, err := OpenRun(out.Dir)
	if err != nil {
		return t, err
	}
	t.Config = *sr.Config
	if t.Results, err = sr.check(outcomeCourse(out, runErr, cfg.Recipe, cfg.WorkerArgv)); err != nil {
		return t, err
	}
	if runErr != nil && t.Results.Verdict == models.Valid {
		return t, ErrRunBroke
	}
	return t, t.keep(cfg.Keep)
}

// keep removes a valid run's directory under KeepFailed.
func (t *TestResult) keep(policy Keep) error {
	if policy != KeepFailed || t.Results.Verdict != models.Valid {
		return nil
	}
	if err := rundir.Remove(t.Config.Store, t.Config.Name, rundir.Dir(t.Results.Dir)); err != nil {
		return fmt.Errorf("keep failed: removing %s: %w", t.Results.Dir, err)
	}
	t.Removed = true
	return nil
}

// Prepare is the configuration a run of c will have, without running it: Resolve,
// Defaults, Validate. A caller that plans many runs (the matrix) learns of a bad one
// before it runs any.
func (c Config) Prepare(ctx context.Context) (Config, error) {
	c, err := c.Resolve(ctx)
	if err != nil {
		return c, err
	}
	c = c.Defaults()
	return c, c.Validate()
}

// Resolve completes what c leaves to its recipe and to chance: a Seed of 0 is drawn;
// an unset workload kind is the recipe's first (mutex for another recipe, such as
// exec), or a counter when fenced; a recipe of the catalogue must do that workload,
// and be no mutant unless Worker.AllowMutants, and its worker command is built
// (Worker) when WorkerArgv is empty. Any other recipe brings its WorkerArgv. The
// defaults are not filled in: Run does that once.
func (c Config) Resolve(ctx context.Context) (Config, error) {
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	r, err := recipes.Find(c.Recipe)
	found := err == nil
	if c.Workload.Kind == "" {
		c.Workload.Kind = defaultKind(r, c.Workload.Fenced)
	}
	switch {
	case !found && len(c.WorkerArgv) == 0 && c.Recipe != "exec":
		return c, fmt.Errorf("recipe: %w", err)
	case !found:
		return c, nil
	case r.Mutant && !c.Worker.AllowMutants:
		return c, fmt.Errorf("recipe: %s is a deliberately broken mutant; add --allow-mutants to run it", r.Name)
	case c.Workload.Fenced && r.RedLock:
		return c, fmt.Errorf("fenced: recipe %s has no fencing token (RedLock gives none)", r.Name)
	case !r.Supports(c.Workload.Kind):
		return c, fmt.Errorf("recipe %s does not do the %s workload (it does %v)", r.Name, c.Workload.Kind, r.Kinds)
	case len(c.WorkerArgv) == 0:
		w := c.Worker
		if g, ok := c.Settings.(goWorkers); ok && r.Runtime == recipes.InProcess && w.Self != "" {
			if w.Self, err = g.GoWorker(w.Self); err != nil {
				return c, err
			}
		}
		c.WorkerArgv, err = w.Command(ctx, r)
	}
	return c, err
}

// goWorkers is a kind's settings that pick the build of zlockcheck serving the Go
// recipes (etcd's --etcd-client: a build against another client library).
type goWorkers interface {
	GoWorker(self string) (string, error)
}

// defaultKind is the workload of a run that names none: a counter when fenced (only
// it has data to fence), else the recipe's first kind, else a mutex.
func defaultKind(r recipes.Entry, fenced bool) workloads.Kind {
	switch {
	case fenced:
		return workloads.Counter
	case len(r.Kinds) > 0:
		return r.Kinds[0]
	}
	return workloads.Mutex
}

// Command is recipe r's worker command line: the Java and Python workers are unpacked
// (and the Curator worker compiled) into the cache directory on first use.
func (w WorkerSetup) Command(ctx context.Context, r recipes.Entry) ([]string, error) {
	env := recipes.CommandEnv{Self: w.Self, JavaDir: w.JavaDir, Log: w.Log}
	if r.Runtime == recipes.InProcess && w.Self == "" {
		return nil, fmt.Errorf("recipe %s: no zlockcheck binary to serve it (WorkerSetup.Self)", r.Name)
	}
	if r.Runtime != recipes.InProcess {
		var err error
		if env.CacheDir, err = maven.CacheDir(w.CacheDir); err != nil {
			return nil, err
		}
	}
	argv, err := r.Command(ctx, env)
	if err != nil || w.CPUProfileDir == "" {
		return argv, err
	}
	if r.Runtime != recipes.InProcess {
		return nil, fmt.Errorf("worker-cpuprofile: recipe %s is not served by zlockcheck worker (only Go recipes are profiled)", r.Name)
	}
	if err := os.MkdirAll(w.CPUProfileDir, 0o755); err != nil {
		return nil, fmt.Errorf("worker-cpuprofile: %w", err)
	}
	dir, err := filepath.Abs(w.CPUProfileDir)
	if err != nil {
		return nil, fmt.Errorf("worker-cpuprofile: %w", err)
	}
	return append(argv, "--cpuprofile", filepath.Join(dir, "worker-%p.pprof")), nil
}

// WithSetup is c with the named fault setup s in place of its faults: its classes,
// targets and shapes, and its interval and client hold when it has them.
func (c Config) WithSetup(s nemesis.Setup) Config {
	c.Nemesis, c.ServerTargets, c.ClientTargets, c.Shapes = s.Classes, s.ServerTargets, s.ClientTargets, s.Shapes
	if s.ClientHold > 0 {
		c.ClientHold = s.ClientHold
	}
	if s.Interval > 0 {
		c.NemesisInterval = s.Interval
	}
	return c
}

// Runnable is setup s less the fault classes c refuses with it (Validate: a class
// the service or topology cannot have, a partition of one server), so that a
// refusal is written in one place and a setup of several classes keeps the ones that
// run. It is Validate's error when s had classes and none is left, or when c refuses
// a fault-free s.
func (c Config) Runnable(s nemesis.Setup) (nemesis.Setup, error) {
	if len(s.Classes) == 0 {
		return s, c.WithSetup(s).Validate()
	}
	var kept []nemesis.Class
	var first error
	for _, cl := range s.Classes {
		one := s
		one.Classes = []nemesis.Class{cl}
		switch err := c.WithSetup(one).Validate(); {
		case err == nil:
			kept = append(kept, cl)
		case first == nil:
			first = err
		}
	}
	if len(kept) == 0 {
		return s, first
	}
	s.Classes = kept
	return s, nil
}

// checkConfig is how the run's history is judged: Check, its unset fields from the
// workload (the lock's model, a semaphore's permits) and the search's default budget.
// The one place a run's models.Config is made: Defaults records it in config.json,
// and a stored run from before config.json recorded it is judged by it.
func (c Config) checkConfig() models.Config {
	m := c.Check
	if m.Kind == "" {
		m.Kind = c.Workload.Kind.Model()
	}
	if m.Permits == 0 {
		m.Permits = c.Workload.Permits
	}
	if m.Timeout == 0 {
		m.Timeout = models.DefaultTimeout
	}
	return m
}

// StoredRun is what a run directory says about the run that made it.
type StoredRun struct {
	Dir rundir.Dir
	// Config is the run's config.json; nil for a directory without one (a copied or
	// hand-made run directory: a history.jsonl, perhaps a results.json).
	Config *Config
	// Prev is the run's results.json, if it has one (zero otherwise).
	Prev report.Results
}

// OpenRun reads a run directory: its config.json (strictly: an unknown field is an
// error naming file, line and field) and, if present, its results.json. Without
// config.json the directory must hold a history.jsonl, and a results.json that does
// not parse is an error (it is all there is to say what the run was).
func OpenRun(path string) (StoredRun, error) {
	d, err := rundir.Open(path)
	if err != nil {
		return StoredRun{}, err
	}
	sr := StoredRun{Dir: d}
	if !d.Has(rundir.Config) {
		if _, err := os.Stat(d.HistoryPath()); err != nil {
			return sr, fmt.Errorf("%s is not a run directory: %w", path, err)
		}
		if err := d.ReadResults(&sr.Prev); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return sr, err
		}
		return sr, nil
	}
	var cfg Config
	if err := d.ReadConfig(&cfg); err != nil {
		return sr, err
	}
	if cfg.Recipe == "" || len(cfg.WorkerArgv) == 0 {
		return sr, fmt.Errorf("%s: field \"recipe\"/\"worker_argv\": missing, not a zlockcheck run configuration", d.File(rundir.Config))
	}
	sr.Config = &cfg
	// Only informative (versions, elapsed time): a broken one is ignored.
	_ = d.ReadResults(&sr.Prev)
	return sr, nil
}

// Check is how the stored run's history is judged, and whether the directory says:
// its config.json's check (for a run from before config.json recorded it: its
// workload's model), else the model its results.json names.
func (sr StoredRun) Check() (models.Config, bool) {
	switch {
	case sr.Config != nil:
		return sr.Config.checkConfig(), true
	case sr.Prev.Model != "":
		return models.Config{Kind: sr.Prev.Model, Permits: sr.Prev.Permits, Timeout: models.DefaultTimeout}, true
	}
	return models.Config{}, false
}

// Recheck checks the stored history again with model and rewrites the run's report
// files (results.json among them); nothing is run.
func (sr StoredRun) Recheck(model models.Config) (report.Results, error) {
	if sr.Config == nil {
		return report.CheckRun(report.NewRun(sr.Dir, sr.Prev.RunConfig(), sr.Prev.Config, sr.Prev.Course()), model)
	}
	return report.CheckRun(report.NewRun(sr.Dir, sr.Config.reportConfig(), *sr.Config, sr.Prev.Course()), model)
}

// check checks the history of a run just made, which went as c says, with the
// run's own check.
func (sr StoredRun) check(c report.Course) (report.Results, error) {
	return report.CheckRun(report.NewRun(sr.Dir, sr.Config.reportConfig(), *sr.Config, c), sr.Config.checkConfig())
}

// reportConfig is what the report reads of the run's configuration.
func (c Config) reportConfig() report.RunConfig {
	tick, syncLimit := c.timing()
	return report.RunConfig{Name: c.Name, RunID: c.RunID, Recipe: c.Recipe, Seed: c.Seed, Workers: c.Workers, Duration: c.Duration,
		SessionTimeout: c.SessionTimeout, Tick: tick, SyncLimit: syncLimit}
}

// outcomeCourse is how a run of recipe went, from its outcome and error, for its report.
func outcomeCourse(out Outcome, runErr error, recipe string, argv []string) report.Course {
	c := report.Course{
		Interrupted: out.Interrupted, Elapsed: out.Elapsed, Service: string(out.Service), ServerVersion: out.ServerVersion,
		RecipeVersion: recipeVersion(recipe, argv),
	}
	if runErr != nil {
		c.SetupError = runErr.Error()
	}
	// A nil *Baseline in an any would not be nil.
	if out.Baseline != nil {
		c.Baseline = out.Baseline
	}
	if out.BaselineWarmup != nil {
		c.BaselineWarmup = out.BaselineWarmup
	}
	if out.BaselineProcesses != nil {
		c.BaselineProcesses = out.BaselineProcesses
	}
	return c
}

// recipeVersion names the library a recipe tests and its installed version, for
// results.json; "" for exec or when unknown. argv is the worker's command line: a Go
// recipe's library is the one its binary was built with.
func recipeVersion(name string, argv []string) string {
	r, err := recipes.Find(name)
	if err != nil {
		return ""
	}
	if len(argv) > 0 {
		return r.VersionIn(argv[0])
	}
	return r.Version()
}
