package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

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
	// Log receives progress lines; nil discards them.
	Log io.Writer `json:"-"`
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
	}
	return c.Workload.Validate()
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

	network, err := netns.Create(ctx, out.RunID)
	if err != nil {
		return out, fmt.Errorf("create network: %w", err)
	}
	// Teardown runs on every return path, whatever ctx says.
	var ens *Ensemble
	defer func() {
		if ens != nil {
			ens.Stop()
		}
		if derr := network.Destroy(); derr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", derr))
		}
	}()

	setupStart := time.Now()
	ens, err = StartEnsemble(ctx, network, EnsembleConfig{
		Nodes: cfg.Nodes, ZKHome: cfg.ZKHome, Dir: filepath.Join(out.Dir, "servers"),
		Tick: cfg.Tick, InitLimit: cfg.InitLimit, SyncLimit: cfg.SyncLimit,
		MaxSessionTimeout: max(60*time.Second, 2*cfg.SessionTimeout),
	})
	if err != nil {
		return out, err
	}
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
		select {
		case <-waited:
		case <-time.After(limit):
			logf("final phase still running after %s", limit)
		case <-ctx.Done():
		}
		liveness := r.judgeLiveness(ctx, ens)
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
}

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

// record appends op at the current time.
func (r *recorder) record(op histories.Op) {
	op.Time = r.now()
	if _, err := r.w.Append(op); err != nil {
		r.mu.Lock()
		if r.firstErr == nil {
			r.firstErr = err
		}
		r.mu.Unlock()
	}
}

func (r *recorder) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstErr
}

// runner drives the workload through the worker slots of one run.
type runner struct {
	cfg      Config
	dir      string
	rec      *recorder
	connect  string
	lockPath string
	logf     func(string, ...any)
	cluster  *cluster
	// judged is closed once the final phase was judged: workers may then go.
	judged chan struct{}
	// finalsLeft counts slots that have not reported their final cycle.
	finalsLeft sync.WaitGroup
	// skipFinal is set before final is closed when there is no final phase.
	skipFinal atomic.Bool
	// initOK is set once any worker was initialised.
	initOK atomic.Bool

	mu          sync.Mutex
	nextProcess int
	finals      map[int]finalResult
	// sessions maps every session id a worker reported to its process.
	sessions map[string]int
}

// refusedError is a worker's certain refusal of its init.
type refusedError struct{ error }

func (e refusedError) Unwrap() error { return e.error }

// counterPath is the counter workload's znode ("" for other workloads).
func (r *runner) counterPath() string {
	if r.cfg.Workload.Kind != workloads.Counter {
		return ""
	}
	return r.lockPath + "-counter"
}

// prepareCounter creates the counter znode holding 0 (with its parents).
func (r *runner) prepareCounter(ctx context.Context, ens *Ensemble) error {
	path := r.counterPath()
	if path == "" {
		return nil
	}
	conn, err := ens.Client(ctx, r.cfg.SessionTimeout)
	if err != nil {
		return fmt.Errorf("counter: %w", err)
	}
	defer conn.Close()
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		data := []byte{}
		if p == path {
			data = []byte("0")
		}
		if _, err := conn.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("counter: create %s: %w", p, err)
		}
	}
	return nil
}

// recordCounterFinal reads the counter at the end and records it as a nemesis op,
// so the checker can compare it with the acknowledged increments.
func (r *runner) recordCounterFinal(ctx context.Context, ens *Ensemble) error {
	path := r.counterPath()
	if path == "" {
		return nil
	}
	conn, err := ens.Client(ctx, r.cfg.SessionTimeout)
	if err != nil {
		return fmt.Errorf("final counter read: %w", err)
	}
	defer conn.Close()
	data, _, err := conn.Get(path)
	if err != nil {
		return fmt.Errorf("final counter read: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return fmt.Errorf("final counter read: %q is not a number", data)
	}
	value, _ := json.Marshal(map[string]int64{"value": n})
	r.rec.record(histories.Op{Type: histories.Info, F: "counter-final", Key: workloads.CounterKey,
		Process: histories.NemesisProcess, Value: value})
	r.logf("counter: final value %d", n)
	return nil
}

// recordNemesis writes a fault's start or stop as a nemesis op.
func (r *runner) recordNemesis(ev nemesis.Event) {
	value := map[string]any{"fault": string(ev.Fault)}
	for k, v := range ev.Value {
		value[k] = v
	}
	if ev.Err != "" {
		value["error"] = ev.Err
	}
	data, err := json.Marshal(value)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"fault": string(ev.Fault), "error": err.Error()})
	}
	r.rec.record(histories.Op{Type: histories.Info, F: string(ev.Phase), Process: histories.NemesisProcess, Value: data})
	desc := string(ev.Phase) + " " + string(data)
	r.logf("nemesis: %s", desc)
}

// workerStarted and workerEnded keep the nemesis's view of live workers current.
func (r *runner) workerStarted(slot int, w *worker) {
	record := func(id string) {
		r.mu.Lock()
		r.sessions[id] = w.process
		r.mu.Unlock()
	}
	w.mu.Lock()
	w.onSession = record
	id := w.sessionID
	w.mu.Unlock()
	if id != "" {
		record(id)
	}
	r.cluster.setWorker(slot, w)
}

func (r *runner) workerEnded(slot int) { r.cluster.setWorker(slot, nil) }

// sessionOwners returns a copy of the session id → process map.
func (r *runner) sessionOwners() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.sessions)
}

// isHolding reports whether process currently holds the lock.
func (r *runner) isHolding(process int) bool {
	r.cluster.mu.Lock()
	defer r.cluster.mu.Unlock()
	for _, w := range r.cluster.workers {
		if w.process == process {
			return w.holding.Load()
		}
	}
	return false
}

func (r *runner) newProcess() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.nextProcess
	r.nextProcess++
	return p
}

// slotRNG gives each slot its own stream derived from the run's seed.
func (r *runner) slotRNG(slot int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(slot)+1))
}

// slot runs worker processes in one namespace, one after the other, until ctx ends:
// a worker whose op ends in info, or that crashes, is replaced by a fresh process
// with a new process id. Then, once final is closed (nil: no final phase), the slot's
// worker (or a fresh one) must acquire and release the lock once.
func (r *runner) slot(ctx context.Context, hard, final <-chan struct{}, slot int, host netns.Host) error {
	rng := r.slotRNG(slot)
	var s *session
	defer func() {
		if s != nil {
			s.end()
		}
	}()
	for ctx.Err() == nil {
		if s == nil || s.dead {
			if s != nil {
				s.end()
			}
			var err error
			if s, err = r.startSession(ctx, hard, slot, host); err != nil {
				return err
			}
			if s == nil {
				continue // ctx ended while starting
			}
		}
		s.loop(ctx, rng)
	}
	reported := false
	defer func() {
		if !reported {
			r.setFinal(slot, finalResult{Slot: slot + 1, Reply: "none", Error: "the slot ended before the final phase"})
		}
	}()
	select {
	case <-final:
	case <-hard:
		return nil
	}
	if r.skipFinal.Load() {
		return nil
	}
	if s == nil || s.dead {
		if s != nil {
			s.end()
		}
		var err error
		if s, err = r.startSession(context.Background(), hard, slot, host); err != nil || s == nil {
			reported = true
			r.setFinal(slot, finalResult{Slot: slot + 1, Reply: "no worker", Error: fmt.Sprint(err)})
			return nil
		}
	}
	reported = true
	r.setFinal(slot, s.finalCycle())
	select {
	case <-r.judged:
	case <-hard:
	}
	return nil
}

// startSession starts a worker process in the slot and initialises it, retrying a few
// times. It returns nil, nil when ctx ended first.
func (r *runner) startSession(ctx context.Context, hard <-chan struct{}, slot int, host netns.Host) (*session, error) {
	for failures := 0; ; {
		if ctx.Err() != nil {
			return nil, nil
		}
		select {
		case <-hard:
			return nil, nil
		default:
		}
		process := r.newProcess()
		logPath := filepath.Join(r.dir, "workers", fmt.Sprintf("w%d-p%d.stderr.log", slot+1, process))
		w, err := startWorker(host, slot, process, r.cfg.WorkerArgv, logPath)
		if err != nil {
			return nil, err
		}
		s := &session{r: r, w: w, hard: hard, key: r.cfg.Workload.Key}
		if err := s.init(slot); err != nil {
			w.kill()
			var refused refusedError
			if errors.As(err, &refused) && !r.initOK.Load() {
				// Before any worker started, a certain refusal is the configuration's
				// fault (an unsupported kind, fencing the recipe cannot do); later it
				// may be a fault's (no server reachable), and the slot retries.
				return nil, fmt.Errorf("recipe %s refused the workload: %w (see %s)", r.cfg.Recipe, err, logPath)
			}
			failures++
			r.logf("worker %d (slot %d) did not start: %v (see %s)", process, slot+1, err, logPath)
			if failures >= 5 {
				return nil, fmt.Errorf("worker slot %d: %d workers in a row failed to start; last: %w (see %s)", slot+1, failures, err, logPath)
			}
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		r.initOK.Store(true)
		r.workerStarted(slot, w)
		return s, nil
	}
}

// end stops the session's worker: politely unless it is dead.
func (s *session) end() {
	s.r.workerEnded(s.w.slot)
	if s.dead {
		s.w.kill()
	} else {
		s.w.close(2 * time.Second)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// session is one worker process's life: it owns the process's history entries.
type session struct {
	r    *runner
	w    *worker
	hard <-chan struct{}
	key  string

	holding bool
	mode    string
	// opKey is the key of the op in flight (the lock's key, or the counter's).
	opKey string
	// dead: the process crashed or must not be used again (after info).
	dead bool
}

// setHolding tracks whether the worker certainly holds the lock, for the loop and
// for the nemesis (which aims at the holder).
func (s *session) setHolding(v bool) {
	s.holding = v
	s.w.holding.Store(v)
}

func (s *session) op(t histories.Type, f string) histories.Op {
	key, mode := s.opKey, s.mode
	if key == "" {
		key = s.key
	}
	if key != s.key {
		mode = ""
	}
	return histories.Op{Type: t, F: f, Process: histories.Client(s.w.process), Key: key, Mode: mode}
}

// init sends the init request; it is not part of the history.
func (s *session) init(slot int) error {
	wl := s.r.cfg.Workload
	_, err := s.w.send(workloads.Request{
		Op: workloads.OpInit, Connect: s.r.connect, SessionTimeoutMS: s.r.cfg.SessionTimeout.Milliseconds(),
		Path: s.r.lockPath, Kind: string(wl.Kind), Permits: wl.Permits, Worker: s.w.process,
		CounterPath: s.r.counterPath(), Fenced: wl.Fenced,
	})
	if err != nil {
		return err
	}
	reply, crashed := s.await(2*s.r.cfg.SessionTimeout + 10*time.Second)
	if crashed != nil {
		return crashed
	}
	if reply.Type != workloads.ReplyOK {
		err := fmt.Errorf("init: %s: %s", reply.Type, reply.Error)
		if reply.Type == workloads.ReplyFail {
			// A worker that certainly refuses its configuration (an unsupported kind,
			// fencing it cannot do) will refuse it again: no point retrying.
			return refusedError{err}
		}
		return err
	}
	return nil
}

// await waits for the reply to the request in flight, handling events meanwhile. It
// returns a non-nil error when the worker crashed, did not answer within limit, or the
// run ended hard; the worker is then unusable.
func (s *session) await(limit time.Duration) (workloads.Message, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case m := <-s.w.msgs:
			if m.crashed != nil {
				return workloads.Message{}, m.crashed
			}
			if m.msg.Event != "" {
				s.event(m.msg, true)
				continue
			}
			return m.msg, nil
		case <-timer.C:
			return workloads.Message{}, fmt.Errorf("no reply within %s", limit)
		case <-s.hard:
			return workloads.Message{}, errors.New("run ended before the reply came")
		}
	}
}

// event handles an event from the worker.
func (s *session) event(m workloads.Message, inFlight bool) {
	if m.Event != workloads.EventLost {
		return
	}
	if !s.holding || inFlight {
		// Nothing certain to end: the op in flight (if any) decides.
		s.r.logf("worker %d: lost event while not holding (ignored): %s", s.w.process, m.Error)
		return
	}
	inv := s.op(histories.Invoke, histories.FRelease)
	inv.Lost, inv.Error = true, m.Error
	s.r.rec.record(inv)
	done := s.op(histories.OK, histories.FRelease)
	done.Lost, done.Error = true, m.Error
	s.r.rec.record(done)
	s.setHolding(false)
}

// crash records the end of a worker that died or must be abandoned: its open op
// completes as info; a hold it had ends at some unknown time from now (a release
// invoke now, completed as info).
func (s *session) crash(openOp string, why error) {
	s.dead = true
	if openOp != "" {
		op := s.op(histories.Info, openOp)
		op.Error = why.Error()
		s.r.rec.record(op)
	}
	// A hold that was on ends at some unknown time from now. (The open op was on the
	// lock's key if it was a release; if it was a counter read or write, the lock is
	// still held and released here, on the lock's key.)
	if s.holding && (openOp == "" || s.opKey != s.key) {
		s.opKey = s.key
		s.r.rec.record(s.op(histories.Invoke, histories.FRelease))
		op := s.op(histories.Info, histories.FRelease)
		op.Error = why.Error()
		s.r.rec.record(op)
	}
	s.opKey = s.key
	s.holding = false
	s.w.holding.Store(false)
}

// call performs one recorded lock operation and returns the reply type ("" when the
// worker crashed or did not answer).
func (s *session) call(f string, req workloads.Request, limit time.Duration) string {
	reply, _ := s.callOn(s.key, f, nil, req, limit)
	return reply.Type
}

// callOn performs one recorded operation on key: invoke (with value), request, and
// the completion the reply says. A crash completes the op as info.
func (s *session) callOn(key, f string, value json.RawMessage, req workloads.Request, limit time.Duration) (workloads.Message, bool) {
	s.opKey = key
	inv := s.op(histories.Invoke, f)
	inv.Value = value
	s.r.rec.record(inv)
	if _, err := s.w.send(req); err != nil {
		s.crash(f, fmt.Errorf("write to worker: %w", err))
		return workloads.Message{}, false
	}
	reply, err := s.await(limit)
	if err != nil {
		s.crash(f, err)
		return workloads.Message{}, false
	}
	op := s.op(histories.Type(reply.Type), f)
	op.Error = reply.Error
	if reply.Type == workloads.ReplyOK {
		switch {
		case len(reply.Token) > 0:
			op.Value = json.RawMessage(`{"token":` + string(reply.Token) + `}`)
		case reply.Value != nil:
			op.Value = strconv.AppendInt(nil, *reply.Value, 10)
		}
	}
	s.r.rec.record(op)
	s.opKey = s.key
	if reply.Type == workloads.ReplyInfo {
		s.dead = true
	}
	return reply, true
}

// loop runs lock cycles until the run's time is up or the worker is unusable.
func (s *session) loop(ctx context.Context, rng *rand.Rand) {
	wl := s.r.cfg.Workload
	// A recipe may need its session timeout more than once to answer honestly (gozk's
	// timed-out acquire closes its session and opens a new one before replying).
	limit := wl.AcquireTimeout + 3*s.r.cfg.SessionTimeout + 5*time.Second
	for ctx.Err() == nil && !s.dead {
		plan := wl.Next(rng)
		s.mode = plan.Request.Mode
		if s.call(histories.FAcquire, plan.Request, limit) != workloads.ReplyOK {
			continue
		}
		s.setHolding(true)
		depth := 1
		// Reentrant: acquire again while holding.
		for depth < plan.Depth && !s.dead && s.holding {
			if s.call(histories.FAcquire, plan.Request, limit) != workloads.ReplyOK {
				break
			}
			depth++
		}
		// The counter workload's critical section is read, think (the hold), write:
		// a holder paused or cut off while thinking writes a stale value unless fenced.
		var read *int64
		if wl.Kind == workloads.Counter && !s.dead && s.holding {
			read = s.readCounter(limit)
		}
		if !s.dead && s.holding {
			s.hold(plan.Hold)
		}
		if read != nil && !s.dead && s.holding {
			s.writeCounter(*read+1, limit)
		}
		for depth > 0 && !s.dead && s.holding {
			if depth == 1 {
				// The certain part of the hold ends when the outermost release is invoked.
				s.w.holding.Store(false)
			}
			reply := s.call(histories.FRelease, workloads.Request{Op: workloads.OpRelease}, limit)
			depth--
			if reply != workloads.ReplyOK {
				break // a failed release ends the hold: the lock was already lost
			}
		}
		if !s.dead {
			s.setHolding(false)
			s.think(wl.Think(rng))
		}
	}
}

// think waits between two lock cycles, handling events; the nemesis may aim at a
// thinking worker (its next request is an acquire).
func (s *session) think(d time.Duration) {
	if d <= 0 {
		return
	}
	s.w.idle.Store(true)
	defer s.w.idle.Store(false)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case m := <-s.w.msgs:
			if m.crashed != nil {
				s.crash("", m.crashed)
				return
			}
			s.event(m.msg, false)
		case <-s.hard:
			return
		}
	}
}

// readCounter reads the counter; nil unless the read succeeded.
func (s *session) readCounter(limit time.Duration) *int64 {
	reply, ok := s.callOn(workloads.CounterKey, histories.FRead, nil, workloads.Request{Op: workloads.OpRead}, limit)
	if !ok || reply.Type != workloads.ReplyOK || reply.Value == nil {
		return nil
	}
	return reply.Value
}

// writeCounter writes next to the counter (fenced or not, as the worker was told at
// init).
func (s *session) writeCounter(next int64, limit time.Duration) {
	_, _ = s.callOn(workloads.CounterKey, histories.FWrite, strconv.AppendInt(nil, next, 10),
		workloads.Request{Op: workloads.OpWrite, Value: &next}, limit)
}

// hold sleeps while holding, handling events; the worker may crash or report lost.
// The hold is not cut short when the run's time is up: release comes after it. A
// stopped worker (SIGSTOP, a "GC pause") cannot end its critical section, so its hold
// lasts at least until it runs again: only a running worker is sent its release.
func (s *session) hold(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			if processStopped(s.w.Pid()) {
				timer.Reset(20 * time.Millisecond)
				continue
			}
			return
		case m := <-s.w.msgs:
			if m.crashed != nil {
				s.crash("", m.crashed)
				return
			}
			s.event(m.msg, false)
			if !s.holding {
				return
			}
		case <-s.hard:
			s.crash("", errors.New("run ended while holding"))
			return
		}
	}
}

// processStopped reports whether pid is stopped by a signal (state T in
// /proc/PID/stat).
func processStopped(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	return data[i+2] == 'T' || data[i+2] == 't'
}
