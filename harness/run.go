package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
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
	// Nodes is the ensemble size.
	Nodes int `json:"nodes"`
	// ZKHome is a ZooKeeper install to use instead of Debian's package.
	ZKHome string `json:"zk_home,omitempty"`
	// Workers is the number of concurrent worker processes.
	Workers int `json:"workers"`
	// Duration is how long the workload runs.
	Duration time.Duration `json:"duration_ns"`
	// Seed drives every random choice of the harness (hold times, modes, faults).
	Seed int64 `json:"seed"`
	// SessionTimeout is the ZooKeeper session timeout workers ask for.
	SessionTimeout time.Duration `json:"session_timeout_ns"`
	// Tick, InitLimit, SyncLimit are the servers' timing knobs.
	Tick      time.Duration `json:"tick_ns"`
	InitLimit int           `json:"init_limit"`
	SyncLimit int           `json:"sync_limit"`
	// NoForceSync runs the servers with forceSync=no (see EnsembleConfig): a weaker
	// durability model, for throughput experiments only.
	NoForceSync bool `json:"no_force_sync,omitempty"`
	// ServerHeap is each server's JVM heap (e.g. "256m", the default) and ServerFullJIT
	// lets their JVMs use C2 (see EnsembleConfig): knobs for the tuning benchmark.
	ServerHeap    string `json:"server_heap,omitempty"`
	ServerFullJIT bool   `json:"server_full_jit,omitempty"`
	// Recipe names the lock implementation under test (for the record).
	Recipe string `json:"recipe"`
	// WorkerArgv is the command line of one worker process.
	WorkerArgv []string `json:"worker_argv"`
	// Workload says what each worker does.
	Workload workloads.Config `json:"workload"`
	// Baseline, when set, runs a plain go-zookeeper lock loop with as many goroutines
	// as workers for as long as the workload, on the same ensemble after the workload:
	// the yardstick for the harness's overhead (see BENCHMARKS.md).
	Baseline bool `json:"baseline,omitempty"`
	// Nemesis lists the fault classes to inject (none: no faults).
	Nemesis []nemesis.Class `json:"nemesis"`
	// NemesisInterval is the mean quiet time between faults.
	NemesisInterval time.Duration `json:"nemesis_interval_ns"`
	// ServerTargets, ClientTargets and Shapes restrict the nemesis's choices (empty:
	// any).
	ServerTargets []nemesis.Target       `json:"server_targets,omitempty"`
	ClientTargets []nemesis.ClientTarget `json:"client_targets,omitempty"`
	Shapes        []nemesis.Shape        `json:"partition_shapes,omitempty"`
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
	// Log receives progress lines; nil discards them.
	Log io.Writer `json:"-"`
	// Progress, when set, is called about every second while the workload runs (and
	// once at its end) with a snapshot for a live status line.
	Progress func(Progress) `json:"-"`
}

// Defaults fills the unset fields of c.
func (c Config) Defaults() Config {
	if c.Store == "" {
		c.Store = "store"
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Workers == 0 {
		c.Workers = 5
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.Tick == 0 {
		c.Tick = DefaultTick
	}
	if c.InitLimit == 0 {
		c.InitLimit = DefaultInitLimit
	}
	if c.SyncLimit == 0 {
		c.SyncLimit = DefaultSyncLimit
	}
	c.Workload = c.Workload.Defaults()
	if c.Name == "" {
		c.Name = fmt.Sprintf("%s-%s", c.Recipe, c.Workload.Kind)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Workload.Kind == workloads.Counter && c.Workload.WriteRetry == 0 {
		c.Workload.WriteRetry = 2 * c.SessionTimeout
	}
	if c.OrphanAfter == 0 {
		c.OrphanAfter = c.SessionTimeout
	}
	if c.StallAfter == 0 {
		longest := nemesis.Schedule{Classes: c.Nemesis, Interval: c.NemesisInterval, SessionTimeout: c.SessionTimeout}.LongestHold()
		c.StallAfter = longest + finalBound(c)
	}
	return c
}

// Validate reports a configuration that cannot run, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 9:
		return fmt.Errorf("nodes: want 1 to 9, got %d", c.Nodes)
	case c.Workers < 1 || c.Workers > 250:
		return fmt.Errorf("workers: want 1 to 250, got %d", c.Workers)
	case c.Duration <= 0:
		return fmt.Errorf("time: want > 0, got %s", c.Duration)
	case c.SessionTimeout < 2*c.Tick:
		return fmt.Errorf("session-timeout: want at least 2 ticks (%s), got %s", 2*c.Tick, c.SessionTimeout)
	case len(c.WorkerArgv) == 0:
		return errors.New("worker command: empty")
	case strings.ContainsAny(c.Name, "/\\") || c.Name == "." || c.Name == "..":
		return fmt.Errorf("name: %q cannot be a directory name", c.Name)
	case c.ServerHeap != "" && !isHeapSize(c.ServerHeap):
		return fmt.Errorf("server-heap: want a JVM size such as 256m or 1g, got %q", c.ServerHeap)
	}
	return c.Workload.Validate()
}

// isHeapSize reports whether s is a JVM -Xmx size: a number with an optional k, m
// or g.
func isHeapSize(s string) bool {
	digits := strings.TrimRight(s, "kKmMgG")
	if len(s)-len(digits) > 1 || digits == "" || digits[0] == '0' {
		return false
	}
	return strings.Trim(digits, "0123456789") == ""
}

// Outcome is what a finished run left behind: where its files are. Checking the
// history is the caller's job.
type Outcome struct {
	// Dir is the run's directory.
	Dir string
	// History is the path of history.jsonl.
	History string
	// RunID tells this run's namespaces and ZooKeeper paths apart.
	RunID string
	// Started and Elapsed time the workload phase.
	Started time.Time
	Elapsed time.Duration
	// Interrupted is set when the run was cancelled before its time was up.
	Interrupted bool
	// ZooKeeperVersion is what the servers reported.
	ZooKeeperVersion string
	// Baseline is the plain-loop yardstick, when Config.Baseline asked for it.
	Baseline *Baseline
	// Liveness is the final phase's verdict (nil when there was none).
	Liveness *Liveness
	// Timings are the set-up and teardown costs (also written to timings.json).
	Timings Timings
}

// Timings are how long a run took to set up and to tear down.
type Timings struct {
	// Quorum is from the start of Run to every server serving (namespaces included).
	Quorum time.Duration `json:"quorum_ns"`
	// Teardown is from the end of the run to every server, worker, namespace and link
	// gone.
	Teardown time.Duration `json:"teardown_ns"`
}

// Run performs one run: network, ensemble, workers, workload, teardown. It returns
// the outcome once every process, namespace and link it made is gone. A cancelled ctx
// (Ctrl-C, SIGTERM) ends the workload early; the history written so far is kept and the
// outcome is returned with Interrupted set. The error is non-nil only when the run
// could not produce a history worth checking (set-up failed).
func Run(ctx context.Context, cfg Config) (out Outcome, err error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return out, err
	}
	out.RunID = randomID()
	cfg.RunID = out.RunID
	out.Dir, err = makeRunDir(cfg.Store, cfg.Name, time.Now())
	if err != nil {
		return out, err
	}
	if err := writeJSON(filepath.Join(out.Dir, "config.json"), cfg); err != nil {
		return out, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, format+"\n", args...) }

	setupStart := time.Now()
	network, err := netns.Create(ctx, out.RunID)
	if err != nil {
		return out, fmt.Errorf("create network: %w", err)
	}
	// Teardown runs on every return path, whatever ctx says.
	var ens *Ensemble
	defer func() {
		teardownStart := time.Now()
		if ens != nil {
			ens.Stop()
		}
		if derr := network.Destroy(); derr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", derr))
		}
		out.Timings.Teardown = time.Since(teardownStart)
		// For benchmarks (bench/run.sh): how long set-up and teardown took.
		_ = writeJSON(filepath.Join(out.Dir, "timings.json"), out.Timings)
	}()

	ens, err = StartEnsemble(ctx, network, EnsembleConfig{
		Nodes: cfg.Nodes, ZKHome: cfg.ZKHome, Dir: filepath.Join(out.Dir, "servers"),
		Tick: cfg.Tick, InitLimit: cfg.InitLimit, SyncLimit: cfg.SyncLimit, NoForceSync: cfg.NoForceSync,
		Heap: cfg.ServerHeap, FullJIT: cfg.ServerFullJIT,
		MaxSessionTimeout: max(60*time.Second, 2*cfg.SessionTimeout),
	})
	if err != nil {
		return out, err
	}
	out.Timings.Quorum = time.Since(setupStart)
	out.ZooKeeperVersion = ens.Version(ctx)
	logf("ensemble of %d serving after %s (%s)", cfg.Nodes, time.Since(setupStart).Round(time.Millisecond), ens.Connect())

	out.History = filepath.Join(out.Dir, "history.jsonl")
	w, err := histories.NewWriter(out.History)
	if err != nil {
		return out, err
	}
	rec := &recorder{w: w, start: time.Now()}
	defer func() {
		if cerr := w.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close history: %w", cerr))
		}
	}()

	hosts := make([]netns.Host, cfg.Workers)
	for i := range hosts {
		hosts[i], err = network.AddHost(ctx, fmt.Sprintf("w%d", i+1), workerAddr(i+1))
		if err != nil {
			return out, err
		}
	}
	if err := os.MkdirAll(filepath.Join(out.Dir, "workers"), 0o755); err != nil {
		return out, err
	}

	cl := newCluster(ens)
	r := &runner{
		cfg: cfg, dir: out.Dir, rec: rec, connect: ens.Connect(), cluster: cl,
		lockPath: fmt.Sprintf("/zlc/%s/%s", out.RunID, cfg.Workload.Key),
		logf:     logf, judged: make(chan struct{}), sessions: map[string]int{},
	}
	if err := r.prepareCounter(ctx, ens); err != nil {
		return out, err
	}
	out.Started = rec.start
	logf("running %d workers of %s for %s (seed %d), history in %s", cfg.Workers, cfg.Recipe, cfg.Duration, cfg.Seed, out.History)
	workCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	// hard is closed when waiting for in-flight ops must end: the user interrupted,
	// or the end-of-run grace ran out.
	hard := make(chan struct{})
	var hardOnce sync.Once
	endHard := func() { hardOnce.Do(func() { close(hard) }) }
	go func() {
		select {
		case <-ctx.Done():
			endHard()
		case <-hard:
		}
	}()

	// The nemesis runs while the workload does; HealAll runs on every exit path.
	nem, err := nemesis.New(nemesis.Schedule{
		Classes: cfg.Nemesis, Interval: cfg.NemesisInterval, SessionTimeout: cfg.SessionTimeout, Seed: cfg.Seed,
		ServerTargets: cfg.ServerTargets, ClientTargets: cfg.ClientTargets, Shapes: cfg.Shapes,
	}, cl, r.recordNemesis)
	if err != nil {
		return out, err
	}
	healed := false
	defer func() {
		if !healed {
			if herr := nem.HealAll(context.Background()); herr != nil {
				err = errors.Join(err, fmt.Errorf("heal: %w", herr))
			}
		}
	}()
	nemDone := make(chan error, 1)
	go func() { nemDone <- nem.Run(workCtx) }()
	progressDone := make(chan struct{})
	go func() { defer close(progressDone); r.reportProgress(workCtx) }()
	defer func() { <-progressDone }()
	if cfg.StallAfter > 0 && cfg.FinalPhase {
		go r.watchStall(workCtx, stop)
	}
	orphanWatch := cfg.OrphanAfter > 0 && cfg.FinalPhase && orphanCheckable(cfg.Workload.Kind)
	if orphanWatch {
		go r.endOnOrphan(workCtx, ens, stop)
	}

	// final is closed when the final phase may start: faults healed, ensemble serving.
	final := make(chan struct{})
	r.finalsLeft.Add(cfg.Workers)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	for i := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs <- fmt.Errorf("worker slot %d panicked: %v\n%s", i+1, p, debug.Stack())
					stop()
					endHard()
				}
			}()
			if err := r.slot(workCtx, hard, final, i, hosts[i]); err != nil {
				errs <- err
				stop()
			}
		}()
	}
	<-workCtx.Done()
	var slotErrs []error
	if nerr := <-nemDone; nerr != nil {
		slotErrs = append(slotErrs, fmt.Errorf("nemesis: %w", nerr))
	}
	herr := nem.HealAll(context.Background())
	healed = true
	if herr != nil {
		slotErrs = append(slotErrs, fmt.Errorf("heal: %w", herr))
	}
	out.Interrupted = ctx.Err() != nil
	// A slot that broke down (its workers would not start) makes the final phase
	// meaningless: the run is an error, not a liveness failure.
	broke := len(errs) > 0
	finalPhase := !out.Interrupted && cfg.FinalPhase && !broke
	endNow := false
	if finalPhase {
		recoverBound := cfg.SessionTimeout*3 + 30*time.Second
		if werr := ens.WaitServing(ctx, recoverBound); werr != nil {
			slotErrs = append(slotErrs, fmt.Errorf("ensemble did not recover after the faults were healed: %w", werr))
			finalPhase = false
		} else {
			logf("faults healed, ensemble serving: final phase (every worker acquires once, bound %s)", r.finalBound())
		}
	}
	if finalPhase {
		close(final)
		// Wait for every slot's final cycle (bounded), then judge while the workers and
		// their sessions still live, so the lock node's children can be attributed.
		waited := make(chan struct{})
		go func() { r.finalsLeft.Wait(); close(waited) }()
		limit := cfg.Workload.AcquireTimeout + 6*cfg.SessionTimeout + r.finalBound() + 10*time.Second
		// A blocking orphan that outlives its own worker's final acquire by OrphanAfter
		// shows the deadlock without waiting out the bound.
		proved := make(chan string, 1)
		watchCtx, endWatch := context.WithCancel(ctx)
		if orphanWatch {
			go r.finalOrphan(watchCtx, ens, func(proof string) { proved <- proof })
		}
		proof := ""
		select {
		case <-waited:
		case proof = <-proved:
			logf("ORPHAN in the final phase: %s", proof)
		case <-time.After(limit):
			logf("final phase still running after %s", limit)
		case <-ctx.Done():
		}
		endWatch()
		liveness := r.judgeLiveness(ctx, ens)
		if !liveness.OK && proof != "" {
			liveness.Proof = proof
			// The workers still waiting would wait out their bound: end them once the
			// verdict is in.
			endNow = true
		}
		liveness.record(rec)
		out.Liveness = &liveness
		if !liveness.OK {
			logf("LIVENESS: not every worker could acquire the lock after the faults were healed")
		}
	}
	if !finalPhase {
		r.skipFinal.Store(true)
		close(final)
	}
	close(r.judged)
	if endNow {
		endHard()
	}
	defer func() {
		// After every worker is gone: nothing can change the counter any more.
		if !out.Interrupted {
			if cerr := r.recordCounterFinal(context.Background(), ens); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	// Let in-flight ops finish for a bounded time: an acquire may wait its timeout.
	grace := cfg.Workload.AcquireTimeout + 3*cfg.SessionTimeout + 5*time.Second
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(grace):
		logf("workers still busy %s after the end: killing them", grace)
		endHard()
		<-finished
	}
	endHard()
	out.Elapsed = time.Since(rec.start)
	out.Interrupted = ctx.Err() != nil
	close(errs)
	for e := range errs {
		slotErrs = append(slotErrs, e)
	}
	if err := rec.err(); err != nil {
		slotErrs = append(slotErrs, fmt.Errorf("history: %w", err))
	}
	if cfg.Baseline && ctx.Err() == nil && len(slotErrs) == 0 {
		rng := r.slotRNG(-1)
		var mu sync.Mutex
		hold := func(int) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return cfg.Workload.Next(rng).Hold
		}
		b, err := runBaseline(ctx, network, ens.Connect(), r.lockPath+"-baseline", cfg.Workers, cfg.Duration, cfg.SessionTimeout, hold)
		if err != nil {
			slotErrs = append(slotErrs, fmt.Errorf("baseline: %w", err))
		} else {
			out.Baseline = &b
			logf("baseline: plain go-zookeeper loop, %d goroutines: %d cycles in %s (%.1f/s)", b.Goroutines, b.Cycles, b.Duration, b.CyclesPerSecond())
		}
	}
	return out, errors.Join(slotErrs...)
}

func workerAddr(slot int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 77, 2, byte(slot)})
}

// makeRunDir creates store/name/<timestamp> and points store/latest and
// store/name/latest at it.
func makeRunDir(store, name string, now time.Time) (string, error) {
	base := filepath.Join(store, name)
	stamp := now.UTC().Format("20060102T150405.000Z")
	dir := filepath.Join(base, stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create run directory: %w", err)
	}
	for _, link := range []struct{ at, to string }{
		{filepath.Join(base, "latest"), stamp},
		{filepath.Join(store, "latest"), filepath.Join(name, stamp)},
	} {
		_ = os.Remove(link.at)
		_ = os.Symlink(link.to, link.at)
	}
	return dir, nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// recorder stamps ops with the run's monotonic clock and appends them to the history.
type recorder struct {
	w     *histories.Writer
	start time.Time

	mu       sync.Mutex
	firstErr error
	// lastAttempt and lastGrant are the times (ns since start) of the latest acquire
	// invoked and the latest acquire granted, for the stall watchdog.
	lastAttempt, lastGrant int64
	// st tallies ops for Status.
	st status
}

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

// record appends op at the current time.
func (r *recorder) record(op histories.Op) {
	op.Time = r.now()
	_, err := r.w.Append(op)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && r.firstErr == nil {
		r.firstErr = err
	}
	r.st.observe(op)
	if !op.Process.Nemesis && op.F == histories.FAcquire {
		switch op.Type {
		case histories.Invoke:
			r.lastAttempt = op.Time
		case histories.OK:
			r.lastGrant = op.Time
		}
	}
}

// sinceGrant says how long ago the lock was last granted (or the run started), and
// whether an acquire was attempted since.
func (r *recorder) sinceGrant() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Duration(r.now() - r.lastGrant), r.lastAttempt > r.lastGrant
}

func (r *recorder) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstErr
}
