// Package report owns what a person and a CI job read after a run: results.json, the
// verdict summary on the terminal, and the HTML timeline of the history. It checks a
// recorded history file (never the live run), so a run's directory can be re-checked
// and re-reported at any time.
package report

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/report/plots"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// Run describes a finished run whose history is to be checked.
type Run struct {
	Dir, History, Test, Recipe string
	// RunID names the run's namespaces (zlc<RunID>...) and ZooKeeper paths.
	RunID string
	Seed  int64
	// Config is the run's configuration, copied into results.json.
	Config      any
	Interrupted bool
	Elapsed     time.Duration
	// Service is the lock service the run used ("zookeeper", "redis"; empty: zookeeper)
	// and ServerVersion the version its servers reported.
	Service, ServerVersion string
	// RecipeVersion names the library under test and its version (e.g. "Curator 5.4.0-3").
	RecipeVersion string
	// SetupError is set when the run broke down before its end.
	SetupError string
	// Baseline is the plain-loop yardstick measured on the same ensemble, if any, and
	// BaselineProcesses the same loop run as one process per session;
	// BaselineWarmup the untimed loop that warmed the servers before the workload.
	Baseline, BaselineProcesses, BaselineWarmup any
	// Workers and Workload are the run's worker slots and planned workload time, for
	// the steady-state rate (zero: not known).
	Workers  int
	Workload time.Duration
	// Cause is the run's timing settings: what sorting a violation into its cause
	// class needs (a zero session timeout: no cause is given) and the session timeout
	// that bounds the coverage table's long holds (zero: the default).
	Cause cause.Params
}

// Results is results.json: the verdict of every check and what it was based on.
type Results struct {
	Verdict         models.Verdict            `json:"verdict"`
	Test            string                    `json:"test"`
	RunID           string                    `json:"run_id,omitempty"`
	Recipe          string                    `json:"recipe"`
	Seed            int64                     `json:"seed"`
	Dir             string                    `json:"dir"`
	History         string                    `json:"history"`
	Model           models.Kind               `json:"model"`
	Permits         int                       `json:"permits,omitempty"`
	Checks          []Check                   `json:"checks"`
	Counts          map[string]map[string]int `json:"counts"`
	Ops             int                       `json:"ops"`
	Processes       int                       `json:"processes"`
	Interrupted     bool                      `json:"interrupted,omitempty"`
	SetupError      string                    `json:"setup_error,omitempty"`
	Warnings        []string                  `json:"warnings,omitempty"`
	ElapsedSeconds  float64                   `json:"elapsed_seconds"`
	CyclesPerSecond float64                   `json:"cycles_per_second"`
	// SteadyCyclesPerSecond counts only the workload's steady state: from the moment
	// every first worker had asked for the lock to the end of the workload time (the
	// yardstick a plain loop, whose sessions are open before its clock starts, is
	// compared with).
	SteadyCyclesPerSecond float64 `json:"steady_cycles_per_second,omitempty"`
	Baseline              any     `json:"baseline,omitempty"`
	BaselineProcesses     any     `json:"baseline_processes,omitempty"`
	BaselineWarmup        any     `json:"baseline_warmup,omitempty"`
	CheckSeconds          float64 `json:"check_seconds"`
	// Service is the lock service the run used ("zookeeper", "redis") and
	// ServerVersion the version its servers reported (report.DisplayVersion).
	// ZooKeeperVersion is the older field: a results.json written before Redis has
	// only it (read as ZooKeeper's, see Server); a ZooKeeper run still writes it, for
	// those who read it.
	Service          string            `json:"service,omitempty"`
	ServerVersion    string            `json:"server_version,omitempty"`
	ZooKeeperVersion string            `json:"zookeeper_version,omitempty"`
	RecipeVersion    string            `json:"recipe_version,omitempty"`
	ToolVersion      string            `json:"tool_version"`
	Config           any               `json:"config,omitempty"`
	Files            map[string]string `json:"files"`
	// Coverage is what the run exercised: the situations that matter for locks.
	Coverage coverage.Table `json:"coverage"`
	// Herd says whether a release woke every waiter, from the servers' watches
	// (package herd); nil when the run has no herd.jsonl.
	Herd *herd.Report `json:"herd,omitempty"`
}

// Check is one key's verdict.
type Check struct {
	Key     string         `json:"key"`
	Verdict models.Verdict `json:"verdict"`
	Checker string         `json:"checker"`
	Ops     int            `json:"ops"`
	Witness string         `json:"witness,omitempty"`
	// Cause is an exclusive lock's violation's cause class (see package cause).
	Cause *cause.Finding `json:"cause,omitempty"`
	// Advisory checks are reported but do not decide the verdict (see Verdict).
	Advisory              bool     `json:"advisory,omitempty"`
	FirstViolationSeconds *float64 `json:"first_violation_seconds,omitempty"`
	WindowIndexes         []int64  `json:"window_indexes,omitempty"`
}

// CheckRun loads the run's history from disk, checks it, and writes into the run
// directory: nemesis.jsonl (the history's nemesis ops), timeline.html, latency.png,
// rate.png, junit.xml, linearizability.html when invalid, and results.json, whose
// Files map lists them all.
func CheckRun(run Run, cfg models.Config) (Results, error) {
	h, warnings, err := histories.Load(run.History)
	if err != nil {
		return Results{}, err
	}
	start := time.Now()
	res, err := models.Check(h, cfg)
	if err != nil {
		return Results{}, fmt.Errorf("%s: %w", run.History, err)
	}
	out := Results{
		Verdict: res.Verdict, Test: run.Test, RunID: run.RunID, Recipe: run.Recipe, Seed: run.Seed, Dir: run.Dir,
		History: run.History, Model: cfg.Kind, Permits: cfg.Permits, Interrupted: run.Interrupted,
		SetupError: run.SetupError, Warnings: warnings, ElapsedSeconds: run.Elapsed.Seconds(),
		CheckSeconds: time.Since(start).Seconds(), RecipeVersion: run.RecipeVersion,
		ToolVersion: toolVersion(), Config: run.Config, Files: map[string]string{},
		Ops: len(h),
	}
	out.Service, out.ServerVersion = serviceName(run.Service), DisplayVersion(run.ServerVersion)
	if kind.Name(out.Service) == kind.ZooKeeper { // the field runs made before there was another service wrote
		out.ZooKeeperVersion = out.ServerVersion
	}
	out.Counts, out.Processes = Count(h)
	out.Baseline, out.BaselineProcesses, out.BaselineWarmup = run.Baseline, run.BaselineProcesses, run.BaselineWarmup
	if run.Elapsed > 0 {
		out.CyclesPerSecond = float64(out.Counts[histories.FRelease]["ok"]) / run.Elapsed.Seconds()
	}
	out.SteadyCyclesPerSecond = SteadyCyclesPerSecond(h, run.Workers, run.Workload)
	out.Coverage = coverage.Compute(h, coverage.Options{Kind: string(cfg.Kind), Permits: cfg.Permits,
		SessionTimeout: run.Cause.SessionTimeout, NoQueue: !kind.Of(kind.Name(out.Service)).Queue})
	d := rundir.Dir(run.Dir)
	if out.Herd, err = Herd(d, h); err != nil {
		// The herd figure is not part of the verdict: say what went wrong.
		out.Warnings = append(out.Warnings, err.Error())
	}
	causes := run.Cause
	causes.Lease = kind.Of(kind.Name(out.Service)).Lease // the run's service says, not its caller
	if out.Checks, err = runChecks(h, res, cfg.Kind, causes, out.Coverage); err != nil {
		return Results{}, fmt.Errorf("%s: %w", run.History, err)
	}
	out.Checks, out.Verdict = Verdict(out.Checks)
	err = writeReport(d, &out, h, res, cfg)
	return out, err
}

// runChecks are a run's checks: each key's (with its first violation, its window and
// an exclusive lock's cause class), its fencing tokens' (TokenChecks), the final
// phase's liveness if the history records one, and a check that fails a history that
// exercised nothing.
func runChecks(h histories.History, res models.Result, kind models.Kind, p cause.Params, covered coverage.Table) ([]Check, error) {
	var checks []Check
	for _, k := range res.Keys {
		c := Check{Key: k.Key, Verdict: k.Verdict, Checker: k.Checker, Ops: k.Ops, Witness: k.Witness}
		if k.FirstViolation >= 0 && k.Verdict == models.Invalid {
			s := float64(k.FirstViolation) / 1e9
			c.FirstViolationSeconds = &s
		}
		for _, op := range k.Window {
			c.WindowIndexes = append(c.WindowIndexes, op.Index)
		}
		c.Cause = causeOf(h, c, kind, p)
		checks = append(checks, c)
	}
	checks = append(checks, TokenChecks(h, res, kind)...)
	live, found, err := LivenessCheck(h)
	if err != nil {
		return nil, err
	}
	if found {
		checks = append(checks, live)
	}
	if c, nothing := ExercisedCheck(covered); nothing {
		checks = append(checks, c)
	}
	return checks, nil
}

// writeReport writes the run's report files into d, listing each in out.Files, and
// results.json last.
func writeReport(d rundir.Dir, out *Results, h histories.History, res models.Result, cfg models.Config) error {
	out.Files["history"] = rundir.History
	if out.Herd != nil {
		out.Files["herd"] = rundir.Herd
	}
	if err := writeFile(d.File(rundir.Nemesis), func(w io.Writer) error { return histories.WriteJSONL(w, NemesisOps(h)) }); err != nil {
		return err
	}
	out.Files["nemesis"] = rundir.Nemesis
	if err := writeFile(d.File(rundir.Timeline), func(w io.Writer) error { return WriteTimeline(w, h, res, out.Coverage) }); err != nil {
		return err
	}
	out.Files["timeline"] = rundir.Timeline
	writePictures(d, out, h)
	if res.Verdict == models.Invalid {
		if err := writeFile(d.File(rundir.Linearizability), func(w io.Writer) error { return models.WriteVisualization(w, res, cfg) }); err != nil {
			return err
		}
		out.Files["linearizability"] = rundir.Linearizability
	}
	if err := writeFile(d.File(rundir.JUnit), func(w io.Writer) error { return WriteJUnit(w, *out, time.Now()) }); err != nil {
		return err
	}
	out.Files["junit"] = rundir.JUnit
	out.Files["results"] = rundir.Results
	return d.WriteJSON(rundir.Results, *out)
}

// writePictures draws the latency and rate plots into d. A picture is a view of the
// history, not part of the verdict: one that cannot be drawn is a warning.
func writePictures(d rundir.Dir, out *Results, h histories.History) {
	chart := plots.Chart{Title: out.Test, Marks: Marks(out.Checks)}
	if chart.Title == "" {
		chart.Title = out.Recipe
	}
	for _, pic := range []struct {
		key, file string
		draw      func(io.Writer, histories.History, plots.Chart) error
	}{{"latency", rundir.Latency, plots.Latency}, {"rate", rundir.Rate, plots.Rate}} {
		if err := writeFile(d.File(pic.file), func(w io.Writer) error { return pic.draw(w, h, chart) }); err != nil {
			out.Warnings = append(out.Warnings, err.Error())
			continue
		}
		out.Files[pic.key] = pic.file
	}
}

// NemesisOps returns the nemesis ops of h (fault starts and stops, the final phase's
// verdict, a counter's final value), in history order.
func NemesisOps(h histories.History) histories.History {
	var ops histories.History
	for _, op := range h {
		if op.Process.Nemesis {
			ops = append(ops, op)
		}
	}
	return ops
}

// Marks returns the moment of each invalid check's first violation, labelled with its
// key, for the pictures.
func Marks(checks []Check) []plots.Mark {
	var marks []plots.Mark
	for _, c := range checks {
		if c.Verdict != models.Invalid || c.FirstViolationSeconds == nil {
			continue
		}
		label := fmt.Sprintf("first violation (key %s)", c.Key)
		switch {
		case c.Key == LivenessKey:
			label = "liveness failed"
		case c.Key == "":
			label = "first violation"
		}
		if c.Advisory {
			label += ", advisory"
		}
		marks = append(marks, plots.Mark{Seconds: *c.FirstViolationSeconds, Label: label})
	}
	return marks
}

func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// Count tallies client ops by function and completion type, and counts processes.
func Count(h histories.History) (map[string]map[string]int, int) {
	counts := map[string]map[string]int{}
	procs := map[int]bool{}
	for _, op := range h {
		if op.Process.Nemesis {
			continue
		}
		procs[op.Process.ID] = true
		if counts[op.F] == nil {
			counts[op.F] = map[string]int{}
		}
		counts[op.F][string(op.Type)]++
	}
	return counts, len(procs)
}

func toolVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return bi.Main.Version + " " + s.Value
			}
		}
		return bi.Main.Version
	}
	return "unknown"
}

// causeOf sorts an exclusive lock's violation into its cause class, when the run's
// settings are known.
func causeOf(h histories.History, c Check, kind models.Kind, p cause.Params) *cause.Finding {
	if c.Verdict != models.Invalid || p.SessionTimeout <= 0 || (kind != models.Mutex && kind != models.Reentrant) {
		return nil
	}
	if f, ok := cause.Classify(h, c.Key, p); ok {
		return &f
	}
	return nil
}

// PrintCheck prints the outcome of checking a history file with cfg, the verdict
// first: the model's verdict per key and the run's liveness verdict if the history
// records one (each check that is not valid with its witness), then what was checked,
// and the coverage table (its session timeout the default: a bare file does not say).
// It returns the overall verdict.
func PrintCheck(w io.Writer, path string, h histories.History, res models.Result, cfg models.Config) (models.Verdict, error) {
	var checks []Check
	for _, k := range res.Keys {
		checks = append(checks, Check{Key: k.Key, Verdict: k.Verdict, Checker: k.Checker, Ops: k.Ops, Witness: k.Witness})
	}
	checks = append(checks, TokenChecks(h, res, cfg.Kind)...)
	live, found, err := LivenessCheck(h)
	if err != nil {
		return models.Unknown, fmt.Errorf("%s: %w", path, err)
	}
	if found {
		checks = append(checks, live)
	}
	cov := Coverage(h, cfg, 0)
	if c, nothing := ExercisedCheck(cov); nothing {
		checks = append(checks, c)
	}
	checks, verdict := Verdict(checks)
	printVerdict(w, verdict, checks, cov)
	fmt.Fprintf(w, "%s: %d ops, %d keys, checked in %s\n", path, len(h), len(res.Keys), res.Duration.Round(time.Millisecond))
	return verdict, coverage.WriteText(w, cov)
}

// CoverageKey names the check that a history exercised something among the per-key
// checks.
const CoverageKey = "coverage"

// Coverage is the coverage table of h checked with cfg, whose run had the given
// session timeout (zero: not known, the default), with ZooKeeper's rows (a history
// alone does not say its service).
func Coverage(h histories.History, cfg models.Config, sessionTimeout time.Duration) coverage.Table {
	return coverage.Compute(h, coverage.Options{Kind: string(cfg.Kind), Permits: cfg.Permits, SessionTimeout: sessionTimeout})
}

// ExercisedCheck is the check that fails, as unknown, a history that exercised
// nothing (no acquire completed ok, or no op at all): it cannot be valid, since it
// could not have shown any bug. nothing is false (and c empty) when it did exercise
// something.
func ExercisedCheck(t coverage.Table) (c Check, nothing bool) {
	if t.Exercised {
		return Check{}, false
	}
	return Check{Key: CoverageKey, Verdict: models.Unknown, Checker: "coverage", Witness: coverage.NothingExercised}, true
}

// Verdict marks advisory checks and returns the overall verdict, as models.Judge
// rules: the worst of the checks that decide it. When a history protects data with
// its lock (a counter key, checked as a register), the lock's own checks are advisory,
// unless their cause is a recipe bug (a check without a cause, as a bare file's,
// stays advisory).
func Verdict(checks []Check) ([]Check, models.Verdict) {
	judged := make([]models.Judged, len(checks))
	for i, c := range checks {
		// A token check is never advisory: a reused token breaks fencing whether or
		// not this run's data showed it.
		judged[i] = models.Judged{Verdict: c.Verdict, Checker: c.Checker,
			Lock: c.Key != LivenessKey && c.Key != CoverageKey && !strings.HasPrefix(c.Key, tokensKeyPrefix),
			Bug:  c.Verdict == models.Invalid && c.Cause != nil && !c.Cause.Class.Honest()}
	}
	v, advisory := models.Judge(judged)
	for i := range checks {
		checks[i].Advisory = advisory[i]
	}
	return checks, v
}

// SteadyCyclesPerSecond is the rate of successful releases between the moment the
// first `workers` client processes (ids 0 to workers-1, the first worker of each slot)
// had all invoked an acquire and the end of the workload time; 0 when that window is
// empty or unknown.
func SteadyCyclesPerSecond(h histories.History, workers int, workload time.Duration) float64 {
	if workers <= 0 || workload <= 0 {
		return 0
	}
	first := make(map[int]int64, workers)
	for _, op := range h {
		if op.Process.Nemesis || op.Process.ID >= workers || op.Type != histories.Invoke || op.F != histories.FAcquire {
			continue
		}
		if _, seen := first[op.Process.ID]; !seen {
			first[op.Process.ID] = op.Time
		}
	}
	if len(first) < workers {
		return 0
	}
	var ready int64
	for _, t := range first {
		ready = max(ready, t)
	}
	end := workload.Nanoseconds()
	if end <= ready {
		return 0
	}
	n := 0
	for _, op := range h {
		if !op.Process.Nemesis && op.Type == histories.OK && op.F == histories.FRelease && op.Time >= ready && op.Time <= end {
			n++
		}
	}
	return float64(n) / (float64(end-ready) / 1e9)
}
