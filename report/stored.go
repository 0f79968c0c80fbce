package report

import (
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models/cause"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// RunConfig is what a report reads of a run's configuration (config.json, whose
// field names these are); the configuration itself is copied whole into results.json.
type RunConfig struct {
	Name   string `json:"name"`
	RunID  string `json:"run_id"`
	Recipe string `json:"recipe"`
	Seed   int64  `json:"seed"`
	// Workers and Duration give the steady-state rate (zero: not known).
	Workers  int           `json:"workers"`
	Duration time.Duration `json:"duration_ns"`
	// SessionTimeout, Tick and SyncLimit are what a violation's cause class and the
	// coverage table need (zero: not known: no cause is given, coverage assumes the
	// default session timeout).
	SessionTimeout time.Duration `json:"session_timeout_ns"`
	Tick           time.Duration `json:"tick_ns"`
	SyncLimit      int           `json:"sync_limit"`
}

// CauseParams are what sorting an overlap into its cause class needs of a run on
// service: the configuration's timing, and whether the service's session is a lease
// (kind.Kind.Lease). The one place both a report and the harness's recipe-bug watch
// take them from.
func (rc RunConfig) CauseParams(service kind.Name) cause.Params {
	return cause.Params{SessionTimeout: rc.SessionTimeout, Tick: rc.Tick, SyncLimit: rc.SyncLimit, Lease: kind.Of(service).Lease}
}

// Course is how a run went, as results.json keeps it beside the verdict: from the
// harness's outcome for a run just made, from the previous results.json (see
// Results.Course) when a stored run is checked again.
type Course struct {
	Interrupted bool
	Elapsed     time.Duration
	// Service is the lock service ("zookeeper", "redis"; empty: zookeeper) and
	// ServerVersion what its servers reported.
	Service, ServerVersion string
	RecipeVersion          string
	// SetupError is set when the run broke down before its end.
	SetupError string
	// Baseline and BaselineProcesses are the plain-loop yardsticks, if any (nil: none),
	// and BaselineWarmup the untimed loop before the workload.
	Baseline, BaselineProcesses, BaselineWarmup any
}

// Course returns how the run these (previous) results describe went.
func (r Results) Course() Course {
	service, version := r.Server()
	return Course{
		Interrupted: r.Interrupted, Elapsed: time.Duration(r.ElapsedSeconds * float64(time.Second)),
		Service: service, ServerVersion: version, RecipeVersion: r.RecipeVersion, SetupError: r.SetupError, Baseline: r.Baseline,
		BaselineProcesses: r.BaselineProcesses, BaselineWarmup: r.BaselineWarmup,
	}
}

// RunConfig returns what these results say of the run's configuration, for a run
// directory without config.json: its test, run id, recipe, seed and the session
// timeout its coverage table used (workers and workload time unknown).
func (r Results) RunConfig() RunConfig {
	return RunConfig{Name: r.Test, RunID: r.RunID, Recipe: r.Recipe, Seed: r.Seed, SessionTimeout: r.Coverage.SessionTimeout}
}

// NewRun is the Run that checks run directory d's history: rc is what its
// configuration says (config, the configuration, is copied whole into results.json),
// c how it went. Every report of a run, made just after it or again later, is
// described here.
func NewRun(d rundir.Dir, rc RunConfig, config any, c Course) Run {
	return Run{
		Dir: d.Path(), History: d.HistoryPath(), Test: rc.Name, RunID: rc.RunID, Recipe: rc.Recipe, Seed: rc.Seed,
		Config: config, Workers: rc.Workers, Workload: rc.Duration,
		Cause:       rc.CauseParams(kind.Name(c.Service)),
		Interrupted: c.Interrupted, Elapsed: c.Elapsed, Service: c.Service, ServerVersion: c.ServerVersion,
		RecipeVersion: c.RecipeVersion, SetupError: c.SetupError, Baseline: c.Baseline,
		BaselineProcesses: c.BaselineProcesses, BaselineWarmup: c.BaselineWarmup,
	}
}
