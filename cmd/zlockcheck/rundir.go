package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// modelFlags are check's --model, --permits and --check-timeout: how a history file
// is checked, and a run directory that does not say how it is judged (the timeout of
// one that does: when given).
type modelFlags struct {
	model   string
	permits int
	timeout time.Duration
	// timeoutSet: --check-timeout was given, and wins over the run's own.
	timeoutSet bool
}

// config is how a stored run is checked: as the run says (harness.StoredRun.Check),
// else as the flags say; a given --check-timeout wins.
func (f modelFlags) config(sr harness.StoredRun) (models.Config, error) {
	m, ok := sr.Check()
	if !ok {
		return f.flagsConfig()
	}
	if f.timeoutSet {
		m.Timeout = f.timeout
	}
	return m, nil
}

// flagsConfig is the model the flags say.
func (f modelFlags) flagsConfig() (models.Config, error) {
	kind, err := models.ParseKind(f.model)
	if err != nil {
		return models.Config{}, fmt.Errorf("--model: %w", err)
	}
	return models.Config{Kind: kind, Permits: f.permits, Timeout: f.timeout}, nil
}

// checkRunDir is `check RUN_DIR`: the stored history re-checked as the run is judged
// (see modelFlags.config), the report files rewritten; nothing is run.
func checkRunDir(path string, flags modelFlags, jsonOut bool, stdout, stderr io.Writer) (int, error) {
	sr, err := harness.OpenRun(path)
	if err != nil {
		return exitError, err
	}
	model, err := flags.config(sr)
	if err != nil {
		return exitError, err
	}
	res, err := sr.Recheck(model)
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
	noSweep := fs.Bool("no-sweep", false, noSweepUsage)
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
	sr, err := harness.OpenRun(fs.Arg(0))
	if err != nil {
		return exitError, err
	}
	if sr.Config == nil {
		return exitError, fmt.Errorf("%s: no %s: replay needs the run's configuration", sr.Dir, rundir.Config)
	}
	cfg := *sr.Config
	cfg.RunID = ""
	if cfg.SSH, err = ssh.override(cfg.SSH, cfg.Servers(), given(fs)); err != nil {
		return exitError, err
	}
	sweepDead(ctx, *noSweep, cfg.SSH, stderr)
	if *store != "" {
		cfg.Store = *store
	} else if cfg.Store, err = sr.Dir.Store(); err != nil { // keep the replay next to the original
		return exitError, err
	}
	// The worker command is rebuilt from the recipe's name (the binary may have moved);
	// an exec worker keeps its stored command line. The stored run was allowed to run.
	if cfg.Recipe != "exec" {
		cfg.WorkerArgv = nil
		if cfg.Worker, err = workerSetup(stderr); err != nil {
			return exitError, err
		}
		cfg.Worker.AllowMutants = true
	}
	if !*quiet {
		cfg.Log = stderr
		fmt.Fprintf(stderr, "replaying %s: %s, seed %d\n", sr.Dir, strings.Join(describeConfig(cfg), ", "), cfg.Seed)
	}
	if given(fs)["check-timeout"] {
		cfg.Check.Timeout = *checkTO
	}
	return runAndReport(ctx, cfg, *jsonOut, stdout, stderr)
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
	out := []string{"recipe " + cfg.Recipe, "workload " + string(cfg.Workload.Kind), "nemesis " + strings.Join(nem, ","),
		fmt.Sprintf("%d workers", cfg.Workers), "time " + cfg.Duration.String()}
	if servers := cfg.DescribeServers(); servers != "" {
		out = append(out, servers)
	}
	return out
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
