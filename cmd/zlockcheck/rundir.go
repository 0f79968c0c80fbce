package main

import (
	"bytes"
	"context"
	"encoding/json"
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
)

// storedRun is what a run directory says about the run that made it.
type storedRun struct {
	dir string
	cfg harness.Config
	// prev is the run's results.json, if it has one (zero otherwise).
	prev report.Results
}

// isRunDir reports whether path is a run directory (it has a config.json).
func isRunDir(path string) bool {
	st, err := os.Stat(filepath.Join(path, "config.json"))
	return err == nil && !st.IsDir()
}

// loadRunDir reads a run directory's config.json (strictly: an unknown field is an
// error naming it) and, if present, its results.json.
func loadRunDir(dir string) (storedRun, error) {
	sr := storedRun{dir: dir}
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return sr, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sr.cfg); err != nil {
		return sr, fmt.Errorf("%s: %w", path, jsonErrorWithLine(data, err))
	}
	if sr.cfg.Recipe == "" || len(sr.cfg.WorkerArgv) == 0 {
		return sr, fmt.Errorf("%s: field \"recipe\"/\"worker_argv\": missing, not a zlockcheck run configuration", path)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "results.json")); err == nil {
		// Only informative (versions, elapsed time): a broken one is ignored.
		_ = json.Unmarshal(data, &sr.prev)
	}
	return sr, nil
}

// jsonErrorWithLine adds the line number to a JSON syntax or type error.
func jsonErrorWithLine(data []byte, err error) error {
	var offset int64 = -1
	switch e := err.(type) {
	case *json.SyntaxError:
		offset = e.Offset
	case *json.UnmarshalTypeError:
		offset = e.Offset
	}
	if offset < 0 {
		return err
	}
	line := 1 + bytes.Count(data[:min(int(offset), len(data))], []byte("\n"))
	return fmt.Errorf("line %d: %w", line, err)
}

// modelConfig is the model a stored run's lock key is checked with.
func (sr storedRun) modelConfig(timeout time.Duration) models.Config {
	return models.Config{Kind: sr.cfg.Workload.Kind.Model(), Permits: sr.cfg.Workload.Permits, Timeout: timeout}
}

// recheck checks a stored run's history again and rewrites its report files.
func (sr storedRun) recheck(timeout time.Duration) (report.Results, error) {
	run := report.Run{
		Dir: sr.dir, History: filepath.Join(sr.dir, "history.jsonl"), Test: sr.cfg.Name, RunID: sr.cfg.RunID,
		Recipe: sr.cfg.Recipe, Seed: sr.cfg.Seed, Config: sr.cfg, Interrupted: sr.prev.Interrupted,
		Elapsed: time.Duration(sr.prev.ElapsedSeconds * float64(time.Second)), ZooKeeperVersion: sr.prev.ZooKeeperVersion, RecipeVersion: sr.prev.RecipeVersion,
		SetupError: sr.prev.SetupError, Baseline: sr.prev.Baseline, Workers: sr.cfg.Workers, Workload: sr.cfg.Duration,
	}
	return report.CheckRun(run, sr.modelConfig(timeout))
}

// checkRunDir is `check RUN_DIR`: the stored history re-checked with the run's own
// model, the report files rewritten; nothing is run.
func checkRunDir(dir string, timeout time.Duration, jsonOut bool, stdout, stderr io.Writer) (int, error) {
	sr, err := loadRunDir(dir)
	if err != nil {
		return exitError, err
	}
	res, err := sr.recheck(timeout)
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
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zlockcheck replay [flags] RUN_DIR\n\nRuns a stored run's configuration again, same seed, against a fresh ensemble.")
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
	cfg := sr.cfg
	cfg.RunID = ""
	if *store != "" {
		cfg.Store = *store
	} else {
		// RUN_DIR is STORE/NAME/STAMP: keep the replay next to the original.
		abs, err := filepath.Abs(sr.dir)
		if err != nil {
			return exitError, err
		}
		abs, err = filepath.EvalSymlinks(abs)
		if err != nil {
			return exitError, err
		}
		cfg.Store = filepath.Dir(filepath.Dir(abs))
	}
	// The worker command is rebuilt from the recipe's name (the binary may have moved);
	// an exec worker keeps its stored command line.
	if cfg.Recipe != "exec" {
		r, err := findRecipe(cfg.Recipe)
		if err != nil {
			return exitError, fmt.Errorf("%s: field \"recipe\": %w", filepath.Join(sr.dir, "config.json"), err)
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
	if !*quiet {
		cfg.Log = stderr
		fmt.Fprintf(stderr, "replaying %s: %s, seed %d\n", sr.dir, strings.Join(describeConfig(cfg), ", "), cfg.Seed)
	}
	return runAndReport(ctx, cfg, sr.modelConfig(*checkTO), runOutput{json: *jsonOut, keep: keepAll}, stdout, stderr)
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
		err = writeJSONL(w, h)
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
	if isRunDir(path) {
		path = filepath.Join(path, "history.jsonl")
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

// writeJSONL writes h as JSON Lines, one op per line (the format of history.jsonl).
func writeJSONL(w io.Writer, h histories.History) error {
	var buf []byte
	for _, op := range h {
		var err error
		if buf, err = op.AppendJSON(buf[:0]); err != nil {
			return fmt.Errorf("op %d: %w", op.Index, err)
		}
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
