package harness

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// Config is everything one run needs. It is written to the run directory as
// config.json, so a run can be repeated from its directory alone.
type Config struct {
	// RunID is set by Run: it names this run's namespaces (zlc<RunID>...) and its
	// ZooKeeper paths (/zlc/<RunID>/...).
	RunID string `json:"run_id"`
	// Name is the test's name: runs are stored under Store/Name/<timestamp>.
	Name string `json:"name"`
	// Store is the directory that holds all runs.
	Store string `json:"store"`
	// Service is the kind of lock service the run starts: zookeeper, redis, postgres
	// or mariadb. Empty: the recipe's (Defaults: a Redis recipe's is redis, a
	// database recipe's its database, any other zookeeper).
	Service kind.Name `json:"service"`
	// Settings are the service's own settings (ZooKeeper's ticks and observers,
	// Redis's topology, a database's keepalive), of the type its kind registered
	// (lockservice.SettingsSpec; nil: its defaults, which Defaults fills in). In
	// config.json: the "settings" section, read as the kind of "service".
	Settings lockservice.Settings `json:"settings,omitempty"`
	// Nodes is the number of servers: the ensemble's size, the Redis instances, a
	// PostgreSQL primary (1) or a primary and its streaming standby (2), or
	// independent MariaDB servers (0: 3; 1 for Redis's single topology and the
	// databases).
	Nodes int `json:"nodes"`
	// SSH, when set, runs the ensemble on real hosts over SSH, one server per node
	// (Nodes is then the number of nodes); unset, in namespaces of this machine.
	SSH *lockservice.SSHConfig `json:"ssh,omitempty"`
	// Workers is the number of concurrent worker processes.
	Workers int `json:"workers"`
	// Duration is how long the workload runs.
	Duration time.Duration `json:"duration_ns"`
	// Seed drives every random choice of the harness (hold times, modes, faults).
	Seed int64 `json:"seed"`
	// SessionTimeout is the session timeout workers ask for: ZooKeeper's session
	// timeout, Redis's lock TTL, a database lock's heartbeat bound or expiry.
	SessionTimeout time.Duration `json:"session_timeout_ns"`
	// Recipe names the lock implementation under test (for the record).
	Recipe string `json:"recipe"`
	// WorkerArgv is the command line of one worker process.
	WorkerArgv []string `json:"worker_argv"`
	// Workload says what each worker does.
	Workload workloads.Config `json:"workload"`
	// Check is how the run's history is judged (the lock's model, a semaphore's
	// permits, the search's budget); its unset fields come from the workload
	// (Defaults). Recorded in config.json, so that a stored run is judged again the
	// same way (StoredRun.Check).
	Check models.Config `json:"check"`
	// Baseline, when set, runs the service's plain client lock loop (go-zookeeper's;
	// on Redis redis.Redis.PlainLoops) with as many goroutines as workers for as
	// long as the workload, on the same servers after the workload: the yardstick for
	// the harness's overhead (see BENCHMARKS.md). BaselineArgv is ZooKeeper's only.
	Baseline bool `json:"baseline,omitempty"`
	// BaselineArgv, when set, runs the same plain loop (after Baseline's, if both) as
	// one OS process per worker slot, each in the slot's namespace with one session,
	// as the workers run: argv is the plain-loop command (`zlockcheck plain-loop`), to
	// which the harness appends the ensemble, the path, the timing and the holds. It
	// tells what one process per client costs apart from what the harness costs.
	BaselineArgv []string `json:"baseline_argv,omitempty"`
	// BaselineWarmup, when Baseline or BaselineArgv is set, runs the plain loop of
	// goroutines this long before the workload, untimed and unrecorded (0: none). The
	// servers' JVMs answer slowly until they have run the lock's requests a while
	// (BENCHMARKS.md, issue 15): without it the workload, which comes first, pays for
	// that warm-up and the plain loop, which comes after, does not.
	BaselineWarmup time.Duration `json:"baseline_warmup_ns,omitempty"`
	// Nemesis lists the fault classes to inject (none: no faults).
	Nemesis []nemesis.Class `json:"nemesis"`
	// NemesisInterval is the mean quiet time between faults.
	NemesisInterval time.Duration `json:"nemesis_interval_ns"`
	// ServerTargets, ClientTargets and Shapes restrict the nemesis's choices (empty:
	// any).
	ServerTargets []nemesis.Target       `json:"server_targets,omitempty"`
	ClientTargets []nemesis.ClientTarget `json:"client_targets,omitempty"`
	Shapes        []nemesis.Shape        `json:"partition_shapes,omitempty"`
	// ClientHold is how long a client partition or pause (0: about twice the
	// session timeout, so that the session expires) or a reply loss (0: 0.85 of it)
	// lasts; nemesis.Schedule.ClientHold.
	ClientHold time.Duration `json:"client_hold_ns,omitempty"`
	// FinalPhase: after the workload and healing, every worker must acquire once.
	FinalPhase bool `json:"final_phase"`
	// StallAfter ends the workload early, for the final phase to judge, when workers
	// kept trying and none acquired the lock for this long: a deadlock (an orphan
	// node) is then reported in seconds instead of at the end of a long run. Zero
	// picks the longest fault hold plus the final phase's bound; negative disables it.
	StallAfter time.Duration `json:"stall_after_ns"`
	// OrphanAfter is how long the lowest lock node may belong to a worker that holds
	// nothing and asks for nothing, or waits behind it with a newer node of its own,
	// before the harness calls it a blocking orphan: during the workload that ends the
	// workload early; in the final phase, half of it (every worker has asked for the
	// lock, no fault is active) ends the final phase with a liveness failure (see
	// orphans.go). Zero picks the session timeout; negative disables it.
	OrphanAfter time.Duration `json:"orphan_after_ns"`
	// EndOnOverlap ends the run early, with no final phase, a session timeout and a
	// second after the first moment more workers hold the lock than it admits (see
	// overlap.go): explore's rounds stop once their verdict and its cause are in.
	EndOnOverlap bool `json:"end_on_overlap,omitempty"`
	// EndOnRecipeBug ends the run early, with no final phase, once the history
	// written so far has an overlap that models/cause calls a recipe bug and that is
	// settled (see bugwatch.go): explore's rounds that run through their honest
	// overlaps (a probe whose every fault makes one) stop at the overlap that
	// matters. Ignored with EndOnOverlap, which ends the run sooner.
	EndOnRecipeBug bool `json:"end_on_recipe_bug,omitempty"`
	// Connect, when set, names an existing ensemble (host:port,...; names resolved
	// once) that the run tests instead of starting its own (run --connect, connect.go):
	// no server is started, stopped or faulted; only client faults are allowed.
	Connect string `json:"connect,omitempty"`
	// Chroot is the znode under which a Connect run keeps everything it writes; it
	// must not exist before the run, which deletes it at its end. Empty: Run picks
	// DefaultChrootParent/<RunID> (recorded in config.json).
	Chroot string `json:"chroot,omitempty"`
	// Site, when set, is where the run happens: a network and ensemble that outlive
	// it (StartSite). Unset, the run makes its own and removes it at the end.
	Site *Site `json:"-"`
	// Log receives progress lines; nil discards them.
	Log io.Writer `json:"-"`
	// Progress, when set, is called about every second while the workload runs (and
	// once at its end) with a snapshot for a live status line.
	Progress func(Progress) `json:"-"`
	// Worker builds the worker command of a recipe of the catalogue when WorkerArgv is
	// empty (Resolve).
	Worker WorkerSetup `json:"-"`
	// Keep says whether Test keeps the run's directory.
	Keep Keep `json:"-"`
}

// DefaultConfig is a run's configuration before a flag or a run file changes it: the
// one place the defaults live (the CLI's flags show them, Defaults fills the zero
// fields of a Config from them). FinalPhase and BaselineWarmup are on by default, but
// are not filled in (false and 0 mean off): a Config built by hand says what it wants.
func DefaultConfig() Config {
	return Config{
		Store: "store", Nodes: 3, Workers: 5, Duration: 30 * time.Second,
		SessionTimeout:  lockservice.DefaultSessionTimeout,
		NemesisInterval: nemesis.DefaultInterval, FinalPhase: true, Workload: workloads.DefaultConfig(),
		BaselineWarmup: 10 * time.Second,
	}
}

// Defaults fills the unset fields of c from DefaultConfig, and the fields derived from
// others (the name, the counter's write retry, the orphan and stall watches' bounds).
func (c Config) Defaults() Config {
	d := DefaultConfig()
	fill(&c.Store, d.Store)
	fill(&c.SessionTimeout, d.SessionTimeout)
	c = c.serviceDefaults()
	fill(&c.Nodes, d.Nodes)
	fill(&c.Workers, d.Workers)
	fill(&c.Duration, d.Duration)
	c.Workload = c.Workload.Defaults()
	c.Workload = c.varied(c.Workload)
	c.Check = c.checkConfig()
	if c.Name == "" {
		c.Name = fmt.Sprintf("%s-%s", c.Recipe, c.Workload.Kind)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Workload.Kind.HasCounter() && c.Workload.WriteRetry == 0 {
		c.Workload.WriteRetry = 2 * c.SessionTimeout
	}
	fill(&c.OrphanAfter, c.SessionTimeout)
	if c.StallAfter == 0 {
		longest := c.schedule().LongestHold()
		c.StallAfter = longest + c.FinalBound()
	}
	return c
}

// schedule is the run's nemesis schedule: its faults, their targets and times.
func (c Config) schedule() nemesis.Schedule {
	return nemesis.Schedule{
		Classes: c.Nemesis, Interval: c.NemesisInterval, SessionTimeout: c.SessionTimeout, Seed: c.Seed,
		ServerTargets: c.ServerTargets, ClientTargets: c.ClientTargets, Shapes: c.Shapes, ClientHold: c.ClientHold,
	}
}

// varied fills the regimes of a workload that asks to vary (workloads.Config.Vary)
// for the run's session timeout and faults: with client faults, one regime has holds
// that outlive a session.
func (c Config) varied(wl workloads.Config) workloads.Config {
	if !wl.Vary || len(wl.Regimes) > 0 {
		return wl
	}
	clientFaults := slices.ContainsFunc(c.Nemesis, nemesis.Class.OnClients)
	wl.Regimes = workloads.Fix(workloads.StandardRegimes(c.SessionTimeout, clientFaults), wl.Fixed)
	fill(&wl.RegimeLength, workloads.DefaultRegimeLength)
	return wl
}

// fill sets *field to def when it is the zero value.
func fill[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Validate reports a configuration that cannot run, naming the field.
func (c Config) Validate() error {
	switch {
	case c.SSH != nil && c.SSH.Validate() != nil:
		return c.SSH.Validate()
	case c.SSH != nil && c.Connect != "":
		return errors.New("ssh-nodes: an existing deployment (connect) is not started anywhere: give one or the other")
	case c.Nodes < 1 || c.Nodes > 9:
		return fmt.Errorf("nodes: want 1 to 9, got %d", c.Nodes)
	case c.Workers < 1 || c.Workers > 250:
		return fmt.Errorf("workers: want 1 to 250, got %d", c.Workers)
	case c.Duration <= 0:
		return fmt.Errorf("time: want > 0, got %s", c.Duration)
	case len(c.WorkerArgv) == 0:
		return errors.New("worker command: empty")
	case strings.ContainsAny(c.Name, "/\\") || c.Name == "." || c.Name == "..":
		return fmt.Errorf("name: %q cannot be a directory name", c.Name)
	case c.BaselineWarmup < 0:
		return fmt.Errorf("baseline-warmup: want >= 0, got %s", c.BaselineWarmup)
	case c.ClientHold < 0:
		return fmt.Errorf("client-hold: want >= 0, got %s", c.ClientHold)
	}
	if err := c.validateConnect(); err != nil {
		return err
	}
	if err := c.validateService(); err != nil {
		return err
	}
	return c.Workload.Validate()
}

// The run's timing bounds, each derived from the configuration in one place.

// bounds are how long the harness waits for its workers' replies (driver.Bounds).
func (c Config) bounds() driver.Bounds { return driver.Bounds{SessionTimeout: c.SessionTimeout} }

// ReplyLimit is how long the harness waits for a worker's reply to a request that may
// itself wait up to wait (an acquire's timeout): driver.Bounds.ReplyLimit.
func (c Config) ReplyLimit(wait time.Duration) time.Duration { return c.bounds().ReplyLimit(wait) }

// FinalBound is how long a final acquire may take: long enough for the sessions of
// crashed workers to expire (three session timeouts after faults, which may have cut
// a worker off, paused or killed it; two without, where only a worker replaced after
// an unknown outcome leaves its session to expire, as ZooKeeper does within a
// session timeout and a tick), for the requests the servers still owe to be answered
// (the kind's Settle), for the one hold that may outlive the workload to end, and for
// every worker to take its turn.
//
// One hold, not one per worker: the workload's end cuts every cycle's wait and hold
// to what is left of it when the cycle begins (workloads.Cycle.FitIn), so an acquire
// still waiting at the end gives up there, and the only hold that outlives the end is
// one granted just before it; a final acquire holds nothing. (One per worker made
// the bound 47 s after rounds with 8 s holds, 2026-11-30.)
func (c Config) FinalBound() time.Duration {
	expiries := time.Duration(3)
	if len(c.Nemesis) == 0 {
		expiries = 2
	}
	return expiries*c.SessionTimeout + kind.Of(c.Service).Settle + c.Workload.LongestHold() + time.Duration(c.Workers)*finalTurnTime
}

// finalTurnTime is what one worker's final turn (an acquire released at once) may take.
const finalTurnTime = 250 * time.Millisecond

// FinalLimit is how long the final phase waits for every worker's final cycle before
// it judges anyway (a worker still finishing its last workload cycle starts its final
// one late).
func (c Config) FinalLimit() time.Duration {
	return c.Workload.LongestTimeout() + 6*c.SessionTimeout + c.FinalBound() + 10*time.Second
}

// RecoverBound is how long the ensemble may take to serve again once every fault was
// healed, before the final phase.
func (c Config) RecoverBound() time.Duration { return 3*c.SessionTimeout + 30*time.Second }

// DrainGrace is how long in-flight ops may take to finish after the run's end before
// their workers are killed: an acquire may wait its timeout.
func (c Config) DrainGrace() time.Duration { return c.ReplyLimit(c.Workload.LongestTimeout()) }

// service is the lock service's part of the run's configuration: its servers'
// files go under serversDir.
func (c Config) service(serversDir string) lockservice.Config {
	cfg := lockservice.Config{
		Kind: c.Service, Dir: serversDir, Nodes: c.Nodes,
		SSH: c.SSH, Connect: c.Connect, ConnectTimeout: c.RecoverBound(),
	}
	if s := c.settings(); s != nil {
		cfg.Settings = s.Server(c.plan(), serversDir)
	}
	return cfg
}
