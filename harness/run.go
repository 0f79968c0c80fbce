package harness

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/rundir"
	"golang.org/x/sync/errgroup"
)

// Outcome is what a finished run left behind: where its files are. Run does not
// check the history: Test does.
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
	// Service is the lock service the run used, and ServerVersion the version its
	// servers reported (ZooKeeper's or Redis's).
	Service       kind.Name
	ServerVersion string
	// Baseline is the plain-loop yardstick, when Config.Baseline asked for it, and
	// BaselineProcesses the per-process one, when Config.BaselineArgv did.
	Baseline, BaselineProcesses *Baseline
	// BaselineWarmup is the plain loop run before the workload to warm the servers
	// (Config.BaselineWarmup), when there was one.
	BaselineWarmup *Baseline
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

// Run performs one run: network, ensemble, workers, workload, final phase, teardown.
// It returns the outcome once every process, namespace and link it made is gone. A
// cancelled ctx (Ctrl-C, SIGTERM) ends the workload early; the history written so far
// is kept and the outcome is returned with Interrupted set. The error is non-nil only
// when the run could not produce a history worth checking (set-up failed) or broke
// down on the way (a slot that could not start workers, a fault that would not heal).
func Run(ctx context.Context, cfg Config) (out Outcome, err error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return out, err
	}
	r, err := newRunner(cfg)
	if err != nil {
		return r.out, err
	}
	// Teardown runs on every return path, whatever ctx says.
	defer func() {
		r.tearDown()
		out, err = r.out, r.err()
	}()
	if serr := r.setUp(ctx); serr != nil {
		r.fail(serr, "")
		return
	}
	w := r.startWorkload(ctx)
	end := r.endWorkload(ctx, w)
	r.out.Liveness = r.finalPhase(ctx, w, end)
	r.drain(ctx, w)
	r.baseline(ctx)
	return
}

// newRunner names the run and makes its directory with config.json.
func newRunner(cfg Config) (*runner, error) {
	cfg.RunID = netns.RandomID()
	cfg = cfg.named()
	r := &runner{
		cfg: cfg, lockPath: cfg.lockPath(), lockQuorum: cfg.lockQuorum(),
		logf: func(format string, args ...any) { fmt.Fprintf(cfg.Log, format+"\n", args...) },
		hard: newLatch(), sessions: map[string]int{},
	}
	r.out.RunID, r.out.Service = cfg.RunID, cfg.Service
	dir, err := rundir.Create(cfg.Store, cfg.Name, time.Now())
	if err != nil {
		return r, err
	}
	r.dir, r.out.Dir = dir, dir.Path()
	return r, dir.WriteJSON(rundir.Config, cfg)
}

// setUp builds the run's network, starts the ensemble, opens the history and makes
// the workers' namespaces. What it made is undone by tearDown, also when it fails.
func (r *runner) setUp(ctx context.Context) error {
	if err := r.useSite(ctx); err != nil {
		return err
	}
	r.network, r.svc, r.hosts = r.site.network, r.site.svc, r.site.hosts
	r.out.Timings.Quorum, r.out.ServerVersion = r.site.quorum, r.site.version
	r.cluster = newCluster(r.svc, RecipeSessionLock(r.cfg.Recipe))
	if err := r.makeChroot(ctx); err != nil {
		return err
	}
	// After the chroot: on an existing database the workers' connect string names
	// the run's own schema.
	r.connect = workerConnect{servers: r.svc.Connect()}
	if s, ok := r.svc.(sentinelled); ok {
		if sentinels, master := s.Sentinels(); master != "" {
			r.connect = workerConnect{servers: sentinels, sentinelMaster: master}
		}
	}
	if c, ok := r.svc.(redisClustered); ok {
		r.connect.redisCluster = c.RedisCluster()
	}
	if k, ok := r.svc.(lockKeyed); ok {
		k.SetLockKey(r.lockKey())
	}

	// Before the history's clock starts: the workload's times count from its start.
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	r.out.History = r.dir.HistoryPath()
	w, err := histories.NewWriter(r.out.History)
	if err != nil {
		return err
	}
	r.rec = &recorder{w: w, start: time.Now()}
	if err := os.MkdirAll(r.dir.WorkersDir(), 0o755); err != nil {
		return err
	}
	r.nem, err = nemesis.New(r.cfg.schedule(), r.cluster, r.recordNemesis)
	if err != nil {
		return err
	}
	return r.prepareCounter(ctx)
}

// useSite makes the run's own site, or checks that the one it was given fits and
// serves (the run before it may have restarted servers).
func (r *runner) useSite(ctx context.Context) error {
	if r.cfg.Site == nil {
		site, err := newSite(ctx, r.cfg, r.cfg.RunID, r.dir.ServersDir(), r.logf)
		r.site, r.ownSite = site, true
		return err
	}
	r.site = r.cfg.Site
	if err := r.site.fits(r.cfg); err != nil {
		return err
	}
	if err := r.site.svc.WaitServing(ctx, r.cfg.RecoverBound()); err != nil {
		return fmt.Errorf("the site's ensemble does not serve: %w", err)
	}
	r.logf("on the site's ensemble (%s)", r.site.svc.Connect())
	return nil
}

// workload is the workload phase in progress: one errgroup for the worker slots, the
// nemesis and the watchdogs (and, later, the final turns), and what its members found.
type workload struct {
	group *errgroup.Group
	// ctx ends when the workload does: its time is up, a watchdog ended it, a member
	// failed, or the run's ctx was cancelled.
	ctx  context.Context
	stop context.CancelFunc
	// nemesisDone is closed once the nemesis stopped injecting.
	nemesisDone chan struct{}
	// ended receives each slot's session when its workload ends (buffered: a slot
	// never waits for the final phase).
	ended chan endedSlot
	// started is set once any worker was initialised: before that, a worker's
	// refusal is the configuration's fault.
	started atomic.Bool
	// overlapped is set when the overlap watch saw more holders than the lock admits
	// (overlap.go); broke when a slot broke down (its workers would not start).
	overlapped, broke atomic.Bool
}

// endedSlot is a slot's session (nil when it has none) at the end of its workload.
type endedSlot struct {
	slot int
	s    *session
}

// turn is a slot's final turn: its result, and its session (nil when none), which
// lives until the liveness verdict is in.
type turn struct {
	res finalResult
	s   *session
}

// workloadEnd is how the workload phase ended, for the final phase to decide whether
// there is one.
type workloadEnd struct {
	interrupted, overlapped, broke bool
}

// errEndWorkload is how a watchdog ends the workload early (stall, blocking orphan):
// not a failure of the run.
var errEndWorkload = errors.New("workload ended early by a watchdog")

// startWorkload starts the worker slots, the nemesis, the stall and orphan watches and
// the progress reports, for the configured duration.
func (r *runner) startWorkload(ctx context.Context) *workload {
	r.out.Started = r.rec.start
	r.logf("running %d workers of %s for %s (seed %d), history in %s", r.cfg.Workers, r.cfg.Recipe, r.cfg.Duration, r.cfg.Seed, r.out.History)
	go func() {
		select {
		case <-ctx.Done():
			r.hard.close()
		case <-r.hard.done():
		}
	}()
	timed, stop := context.WithTimeout(ctx, r.cfg.Duration)
	g, gctx := errgroup.WithContext(timed)
	r.endFailoverWatch = r.watchFailovers()
	w := &workload{group: g, ctx: gctx, stop: stop, nemesisDone: make(chan struct{}), ended: make(chan endedSlot, r.cfg.Workers)}
	g.Go(func() error {
		defer close(w.nemesisDone)
		return r.fail(r.nem.Run(gctx), "nemesis")
	})
	g.Go(func() error { r.reportProgress(gctx); return nil })
	g.Go(func() error { return r.watchHerd(gctx) })
	if r.cfg.StallAfter > 0 && r.cfg.FinalPhase {
		g.Go(func() error { return r.watchStall(gctx) })
	}
	if r.orphanWatch() {
		g.Go(func() error { return r.endOnOrphan(gctx) })
	}
	if r.overlapWatch() {
		g.Go(func() error {
			err := r.endOnOverlap(gctx)
			w.overlapped.Store(err != nil)
			return err
		})
	}
	if r.bugWatch() {
		g.Go(func() error {
			err := r.watchRecipeBug(gctx)
			w.overlapped.Store(err != nil)
			return err
		})
	}
	for i := range r.cfg.Workers {
		g.Go(func() error { return r.slot(gctx, w, i) })
	}
	return w
}

// orphanWatch reports whether the run watches for blocking orphan nodes.
func (r *runner) orphanWatch() bool {
	return r.cfg.OrphanAfter > 0 && r.cfg.FinalPhase && r.cfg.Workload.Kind.QueuesBehindLowest()
}

// endWorkload waits for the workload's end, heals every fault and says how it ended.
func (r *runner) endWorkload(ctx context.Context, w *workload) workloadEnd {
	<-w.ctx.Done()
	<-w.nemesisDone
	r.heal()
	r.out.Interrupted = ctx.Err() != nil
	return workloadEnd{interrupted: r.out.Interrupted, overlapped: w.overlapped.Load(), broke: w.broke.Load()}
}

// heal takes back every fault the nemesis applied (once).
func (r *runner) heal() {
	if r.nem == nil || r.healed {
		return
	}
	r.healed = true
	r.fail(r.nem.HealAll(context.Background()), "heal")
}

// finalPhase lets every slot's worker acquire the lock once, now that the faults are
// healed and the ensemble serves again, and judges liveness while the workers and
// their sessions still live (so the lock's entries can be attributed); it returns the
// verdict. With no final phase (interrupted, disabled, a slot broke down, an overlap
// ended the run) it returns nil and the slots' sessions end at the drain.
func (r *runner) finalPhase(ctx context.Context, w *workload, end workloadEnd) *Liveness {
	// A slot that broke down (its workers would not start) makes the final phase
	// meaningless: the run is an error, not a liveness failure.
	ok := !end.interrupted && r.cfg.FinalPhase && !end.broke && !end.overlapped
	if ok && r.fail(r.svc.WaitServing(ctx, r.cfg.RecoverBound()), "ensemble did not recover after the faults were healed") != nil {
		ok = false
	}
	if !ok {
		if end.overlapped {
			// The verdict is in: end the holds and waits still running now.
			r.hard.close()
		}
		return nil
	}
	r.logf("faults healed, ensemble serving: final phase (every worker acquires once, bound %s)", r.cfg.FinalBound())
	turns := make(chan turn, r.cfg.Workers)
	for range r.cfg.Workers {
		w.group.Go(func() error { turns <- r.finalTurn(w); return nil })
	}
	finals, proof := r.awaitFinals(ctx, w, turns)
	if ctx.Err() != nil {
		// Interrupted mid-phase (Ctrl-C; explore's other lane found the bug): the
		// turns still waiting were cut off, not refused, so there is no verdict.
		r.out.Interrupted = true
		r.logf("final phase interrupted: no liveness verdict")
		r.hard.close()
		return nil
	}
	liveness := r.judgeLiveness(ctx, finals)
	switch {
	case liveness.OK || proof.text == "":
	case proof.missedWakeup:
		liveness.MissedWakeup = true
	default:
		liveness.Proof = proof.text
	}
	liveness.record(r.rec)
	if !liveness.OK {
		r.logf("LIVENESS: not every worker could acquire the lock after the faults were healed")
	}
	if !liveness.OK && proof.text != "" {
		// The workers still waiting would wait out their bound: end them now that the
		// verdict is in.
		r.hard.close()
	}
	return &liveness
}

// finalProof is why the final phase ended before its bound: a blocking orphan that
// outlived its own worker's final acquire (the lock can never be granted again), or
// a missed wake-up (recorded as its orphan op; the waiter would wait out its bound).
type finalProof struct {
	text         string
	missedWakeup bool
}

// awaitFinals collects the slots' final turns (bounded) and returns their results;
// every session, of a turn collected or of one still running, ends once this
// returns. A blocking orphan that outlives its own worker's final acquire, or a
// missed wake-up, shows the failure without waiting out the bound: its proof is
// returned.
func (r *runner) awaitFinals(ctx context.Context, w *workload, turns <-chan turn) (finals []finalResult, proof finalProof) {
	proved := make(chan finalProof, 1)
	watchCtx, endWatch := context.WithCancel(ctx)
	defer endWatch()
	if r.orphanWatch() {
		go r.finalOrphan(watchCtx, func(p finalProof) { proved <- p })
	}
	var sessions []*session
	defer func() {
		// After the verdict: the sessions collected end now, the others as their
		// turns end.
		for _, s := range sessions {
			w.group.Go(func() error { s.end(); return nil })
		}
		for range r.cfg.Workers - len(finals) {
			w.group.Go(func() error { endTurn(<-turns); return nil })
		}
	}()
	limit := time.After(r.cfg.FinalLimit())
	for len(finals) < r.cfg.Workers {
		select {
		case t := <-turns:
			finals = append(finals, t.res)
			if t.s != nil {
				sessions = append(sessions, t.s)
			}
			continue
		case proof = <-proved:
			r.logf("final phase ended early: %s", proof.text)
		case <-limit:
			r.logf("final phase still running after %s", r.cfg.FinalLimit())
		case <-ctx.Done():
		}
		break
	}
	return finals, proof
}

// endTurn ends a final turn's session, if it has one.
func endTurn(t turn) {
	if t.s != nil {
		t.s.end()
	}
}

// drain lets in-flight ops finish for a bounded time (an acquire may wait its
// timeout), then kills what is left, and records the counter's final value once no
// worker can change it any more.
func (r *runner) drain(ctx context.Context, w *workload) {
	// Every member records its own failure (fail): the group's first error is only
	// what ended the workload.
	finished := make(chan struct{})
	go func() { _ = w.group.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(r.cfg.DrainGrace()):
		r.logf("workers still busy %s after the end: killing them", r.cfg.DrainGrace())
		r.hard.close()
		<-finished
	}
	w.stop()
	r.hard.close()
	endSessions(w)
	r.endFailoverWatch()
	r.out.Elapsed = time.Since(r.rec.start)
	r.out.Interrupted = ctx.Err() != nil
	r.fail(r.rec.err(), "history")
	r.fail(r.violationsError(), "")
	if !r.out.Interrupted {
		r.fail(r.recordCounterFinal(context.Background()), "")
	}
}

// endSessions ends the sessions of slots nobody took a final turn with (no final
// phase, or the run ended hard first): every slot has handed its session over once
// the group is done.
func endSessions(w *workload) {
	for {
		select {
		case e := <-w.ended:
			if e.s != nil {
				e.s.end()
			}
		default:
			return
		}
	}
}

// baseline times the service's plain client loop on the same servers, when asked and the
// run went well (BENCHMARKS.md): as goroutines of this process (Config.Baseline), then
// as one process per worker slot (Config.BaselineArgv), or both.
func (r *runner) baseline(ctx context.Context) {
	if ctx.Err() != nil || r.err() != nil {
		return
	}
	path := r.lockPath + "-baseline"
	if r.cfg.Baseline && !r.goroutineBaseline(ctx, path) {
		return
	}
	if len(r.cfg.BaselineArgv) > 0 {
		r.processBaseline(ctx, path+"-processes")
	}
}

// warmUp runs the plain loop of goroutines for Config.BaselineWarmup before the
// workload, when a baseline is asked for: the servers' JVMs answer slowly until they
// have run the lock's requests a while, and the workload comes first (BENCHMARKS.md,
// issue 15). Nothing is recorded; the outcome keeps its cycles.
func (r *runner) warmUp(ctx context.Context) error {
	if r.cfg.BaselineWarmup <= 0 || (!r.cfg.Baseline && len(r.cfg.BaselineArgv) == 0) {
		return nil
	}
	b, err := r.plainLoops(ctx, r.lockPath+"-warmup", r.cfg.BaselineWarmup)
	if err != nil {
		return fmt.Errorf("baseline warm-up: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.out.BaselineWarmup = &b
	r.logf("baseline warm-up: plain client loop, %d goroutines, untimed: %d cycles in %s", b.Goroutines, b.Cycles, b.Duration)
	return nil
}

// plainLoops runs the service's plain client loop on path for d with one session
// per worker slot, holding as the workload holds.
func (r *runner) plainLoops(ctx context.Context, path string, d time.Duration) (Baseline, error) {
	y, ok := r.svc.(yardstick)
	if !ok {
		return Baseline{}, errors.New("the service has no plain client loop to measure against")
	}
	return y.PlainLoops(ctx, path, r.cfg.Workers, d, r.cfg.SessionTimeout, r.baselineHolds())
}

// baselineHolds draws the plain loop's holds as the workload draws them (one stream
// for every goroutine, from the slot -1 stream).
func (r *runner) baselineHolds() func(int) time.Duration {
	rng := r.slotRNG(-1)
	var mu sync.Mutex
	return func(int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return r.cfg.Workload.Next(rng, -1).Hold
	}
}

// goroutineBaseline runs the plain loop as goroutines of this process on lock path;
// false when it failed the run.
func (r *runner) goroutineBaseline(ctx context.Context, path string) bool {
	b, err := r.plainLoops(ctx, path, r.cfg.Duration)
	if r.fail(err, "baseline") != nil {
		return false
	}
	r.out.Baseline = &b
	r.logf("baseline: plain client loop, %d goroutines in the harness: %d cycles in %s (%.1f/s)", b.Goroutines, b.Cycles, b.Duration, b.CyclesPerSecond())
	return true
}

// processBaseline runs the plain loop as one process per worker slot on lock path.
func (r *runner) processBaseline(ctx context.Context, path string) {
	w := r.cfg.Workload.Defaults()
	b, err := runBaselineProcesses(ctx, r.cfg.BaselineArgv, r.hosts[:r.cfg.Workers], r.connect.servers, path, r.cfg.Duration, r.cfg.SessionTimeout,
		w.HoldMin, w.HoldMax, uint64(r.cfg.Seed))
	if r.fail(err, "baseline (processes)") != nil {
		return
	}
	r.out.BaselineProcesses = &b
	r.logf("baseline: plain go-zookeeper loop, %d processes in the worker namespaces: %d cycles in %s (%.1f/s)", b.Goroutines, b.Cycles, b.Duration, b.CyclesPerSecond())
}

// tearDown heals, closes the history, stops the servers and removes the network,
// whatever state the run is in; it records how long that took (timings.json).
func (r *runner) tearDown() {
	start := time.Now()
	r.heal()
	if r.rec != nil {
		r.fail(r.rec.w.Close(), "close history")
	}
	r.fail(r.removeChroot(), "teardown")
	switch {
	case r.site == nil:
	case r.ownSite:
		r.fail(r.site.Close(), "teardown")
	default:
		r.fail(r.site.clear(), "teardown")
	}
	r.out.Timings.Teardown = time.Since(start)
	// For benchmarks (bench/run.sh): how long set-up and teardown took.
	_ = r.dir.WriteJSON(rundir.Timings, r.out.Timings)
}

func workerAddr(slot int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 77, 2, byte(slot)})
}
