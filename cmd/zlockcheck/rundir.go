package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// storedRun is what a run directory says about the run that made it.
type storedRun struct {
	dir rundir.Dir
	// cfg is the run's config.json; nil for a directory without one (a copied or
	// hand-made run directory: a history.jsonl, perhaps a results.json).
	cfg *harness.Config
	// prev is the run's results.json, if it has one (zero otherwise).
	prev report.Results
}

// loadRunDir reads a run directory: its config.json (strictly: an unknown field is an
// error naming file, line and field) and, if present, its results.json. Without
// config.json the directory must hold a history.jsonl, and a results.json that does
// not parse is an error (it is all there is to say what the run was).
func loadRunDir(path string) (storedRun, error) {
	d, err := rundir.Open(path)
	if err != nil {
		return storedRun{}, err
	}
	sr := storedRun{dir: d}
	if !d.Has(rundir.Config) {
		if _, err := os.Stat(d.HistoryPath()); err != nil {
			return sr, fmt.Errorf("%s is not a run directory: %w", path, err)
		}
		if err := d.ReadResults(&sr.prev); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return sr, err
		}
		return sr, nil
	}
	var cfg harness.Config
	if err := d.ReadConfig(&cfg); err != nil {
		return sr, err
	}
	if cfg.Recipe == "" || len(cfg.WorkerArgv) == 0 {
		return sr, fmt.Errorf("%s: field \"recipe\"/\"worker_argv\": missing, not a zlockcheck run configuration", d.File(rundir.Config))
	}
	sr.cfg = &cfg
	// Only informative (versions, elapsed time): a broken one is ignored.
	_ = d.ReadResults(&sr.prev)
	return sr, nil
}

// modelFlags are check's --model and --permits, for a run directory that does not
// say its model.
type modelFlags struct {
	model   string
	permits int
}

// modelConfig is the model a stored run's lock key is checked with: its workload's
// (config.json), else the model its results.json names, else the flags'.
func (sr storedRun) modelConfig(timeout time.Duration, flags modelFlags) (models.Config, error) {
	switch {
	case sr.cfg != nil:
		return models.Config{Kind: sr.cfg.Workload.Kind.Model(), Permits: sr.cfg.Workload.Permits, Timeout: timeout}, nil
	case sr.prev.Model != "":
		return models.Config{Kind: sr.prev.Model, Permits: sr.prev.Permits, Timeout: timeout}, nil
	}
	kind, err := models.ParseKind(flags.model)
	if err != nil {
		return models.Config{}, fmt.Errorf("--model: %w", err)
	}
	return models.Config{Kind: kind, Permits: flags.permits, Timeout: timeout}, nil
}

// reportRun is the report.Run of the stored run, to check it again.
func (sr storedRun) reportRun() report.Run {
	if sr.cfg == nil {
		return report.NewRun(sr.dir, sr.prev.RunConfig(), sr.prev.Config, sr.prev.Course())
	}
	return report.NewRun(sr.dir, runConfig(*sr.cfg), *sr.cfg, sr.prev.Course())
}

// runConfig is what the report reads of a harness configuration.
func runConfig(cfg harness.Config) report.RunConfig {
	return report.RunConfig{Name: cfg.Name, RunID: cfg.RunID, Recipe: cfg.Recipe, Seed: cfg.Seed, Workers: cfg.Workers, Duration: cfg.Duration,
		SessionTimeout: cfg.SessionTimeout, Tick: cfg.Tick, SyncLimit: cfg.SyncLimit}
}

// checkRunDir is `check RUN_DIR`: the stored history re-checked with the run's own
// model (see modelConfig), the report files rewritten; nothing is run.
func checkRunDir(path string, timeout time.Duration, flags modelFlags, jsonOut bool, stdout, stderr io.Writer) (int, error) {
	sr, err := loadRunDir(path)
	if err != nil {
		return exitError, err
	}
	model, err := sr.modelConfig(timeout, flags)
	if err != nil {
		return exitError, err
	}
	res, err := report.CheckRun(sr.reportRun(), model)
	if err != nil {
		return exitError, err
	}
	if jsonOut {
		report.Summary(stderr, res)
		if err := writeResultsJSON(stdout, res); err != nil {
			return exitError, err
		}
	} else {
		report.Summary(stdout, res)
	}
	return verdictCode(res.Verdict), nil
}

func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("replay", stderr)
	store := fs.String("store", "", "directory that keeps the new run (default: the store the run came from)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	jsonOut := fs.Bool("json", false, "print the final result as JSON on stdout; the summary goes to stderr")
	checkTO := fs.Duration("check-timeout", models.DefaultTimeout, "budget of the linearizability search; past it the verdict is unknown")
	var ssh sshOptions
	ssh.register(fs, true)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zlockcheck replay [flags] RUN_DIR\n\nRuns a stored run's configuration again, same seed, against a fresh ensemble\n(a run on SSH nodes on the nodes it names, or on --ssh-nodes given again).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() != 1 {
		return exitError, usageError{"replay takes exactly one run directory"}
	}
	sr, err := loadRunDir(fs.Arg(0))
	if err != nil {
		return exitError, err
	}
	if sr.cfg == nil {
		return exitError, fmt.Errorf("%s: no %s: replay needs the run's configuration", sr.dir, rundir.Config)
	}
	cfg := *sr.cfg
	cfg.RunID = ""
	if cfg.SSH, err = ssh.override(cfg.SSH, cfg.Nodes, given(fs)); err != nil {
		return exitError, err
	}
	if *store != "" {
		cfg.Store = *store
	} else if cfg.Store, err = sr.dir.Store(); err != nil { // keep the replay next to the original
		return exitError, err
	}
	// The worker command is rebuilt from the recipe's name (the binary may have moved);
	// an exec worker keeps its stored command line.
	if cfg.Recipe != "exec" {
		r, err := recipes.Find(cfg.Recipe)
		if err != nil {
			return exitError, fmt.Errorf("%s: field \"recipe\": %w", sr.dir.File(rundir.Config), err)
		}
		if cfg.WorkerArgv, err = workerArgv(ctx, r, stderr); err != nil {
			return exitError, err
		}
	}
	if !*quiet {
		cfg.Log = stderr
		fmt.Fprintf(stderr, "replaying %s: %s, seed %d\n", sr.dir, strings.Join(describeConfig(cfg), ", "), cfg.Seed)
	}
	model, err := sr.modelConfig(*checkTO, modelFlags{})
	if err != nil {
		return exitError, err
	}
	return runAndReport(ctx, cfg, model, runOutput{json: *jsonOut, keep: keepAll}, stdout, stderr)
}

// describeConfig names what a run did, for a person.
func describeConfig(cfg harness.Config) []string {
	var nem []string
	for _, c := range cfg.Nemesis {
		nem = append(nem, string(c))
	}
	if len(nem) == 0 {
		nem = []string{"none"}
	}
	return []string{"recipe " + cfg.Recipe, "workload " + string(cfg.Workload.Kind), "nemesis " + strings.Join(nem, ","),
		fmt.Sprintf("%d workers", cfg.Workers), "time " + cfg.Duration.String()}
}

func exportCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("export", stderr)
	format := fs.String("format", "edn", "output format: edn (Jepsen) or jsonl")
	out := fs.String("o", "", "write to this file instead of stdout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zlockcheck export [--format edn|jsonl] [-o FILE] RUN_DIR|HISTORY\n\nConverts a history (a run directory's history.jsonl, a .jsonl or a Jepsen .edn file).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() != 1 {
		return exitError, usageError{"export takes exactly one run directory or history file"}
	}
	h, err := loadAnyHistory(fs.Arg(0), stderr)
	if err != nil {
		return exitError, err
	}
	var w io.Writer = stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			return exitError, err
		}
		w = f
	}
	switch *format {
	case "edn":
		err = histories.WriteEDN(w, h)
	case "jsonl":
		err = histories.WriteJSONL(w, h)
	default:
		err = fmt.Errorf("--format: want edn or jsonl, got %q", *format)
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return exitError, err
	}
	return exitValid, nil
}

// loadAnyHistory loads a run directory's history, or a history file by its extension.
func loadAnyHistory(path string, stderr io.Writer) (histories.History, error) {
	if d := rundir.Dir(path); d.Has(rundir.Config) {
		path = d.HistoryPath()
	}
	if strings.EqualFold(filepath.Ext(path), ".edn") {
		return histories.LoadEDN(path)
	}
	h, warnings, err := histories.Load(path)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	return h, err
}
