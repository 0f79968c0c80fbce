package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/rundir"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// runner is one run in progress: what Run's phases share. Its slots drive the workload
// through worker processes; its recorder writes the history.
type runner struct {
	cfg      Config
	out      Outcome
	dir      rundir.Dir
	lockPath string
	// lockQuorum are the keys of a lock held by a majority of them (the recipe's
	// ClusterQuorum), nil for the others.
	lockQuorum []string
	logf       func(string, ...any)

	// Set up by setUp.
	// site is where the run happens; ownSite says the run made it (and removes it).
	site    *Site
	ownSite bool
	network *netns.Network
	svc     lockservice.Service
	connect workerConnect
	cluster *cluster
	rec     *recorder
	hosts   []netns.Host
	nem     *nemesis.Nemesis
	healed  bool
	// endFailoverWatch ends the watch of the servers' own failovers (started with
	// the workload, ended at the drain).
	endFailoverWatch func()
	// undoChroot removes what a --connect run created for its chroot (connect.go).
	undoChroot func(ctx context.Context, within time.Duration) error

	// hard is closed when waiting for in-flight ops must end: the user interrupted,
	// the end-of-run grace ran out, or the verdict is in before the final phase's end
	// (an overlap, a proven deadlock).
	hard *latch

	mu   sync.Mutex
	errs []error
	// violations are the workers' breaches of the protocol, in order.
	violations  []string
	nextProcess int
	// sessions maps every session id a worker reported to its process.
	sessions map[string]int
	// places are where each process's latest acquire said its lock lives.
	places map[int]workloads.LockPlace
	// blind are the processes that cannot know yet that they lost the lock, until
	// when (overlap.go): paused, or their session ended under them, by the nemesis.
	blind map[int]time.Time
}

// fail records err (prefixed with what, unless empty) as one of the run's failures and
// returns it; a nil err is ignored.
func (r *runner) fail(err error, what string) error {
	if err == nil {
		return nil
	}
	if what != "" {
		err = fmt.Errorf("%s: %w", what, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	return err
}

// err is every failure of the run, joined (nil when none).
func (r *runner) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// violated notes a worker's breach of the worker protocol (the worker is treated as
// crashed); the run then fails with the first of them named (violationsError).
func (r *runner) violated(process int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf("worker process %d: %v", process, err))
}

// violationsError says how many protocol violations the workers made, and the first.
func (r *runner) violationsError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) == 0 {
		return nil
	}
	return fmt.Errorf("the workers broke the worker protocol %d times (each such worker was treated as crashed); the first: %s", len(r.violations), r.violations[0])
}

// latch is a channel closed once, by whoever comes first.
type latch struct {
	ch   chan struct{}
	once sync.Once
}

func newLatch() *latch                 { return &latch{ch: make(chan struct{})} }
func (l *latch) close()                { l.once.Do(func() { close(l.ch) }) }
func (l *latch) done() <-chan struct{} { return l.ch }

// refusedError is a worker's certain refusal of its init.
type refusedError struct{ error }

func (e refusedError) Unwrap() error { return e.error }

// counterPath is the counter workload's znode ("" for other workloads).
func (r *runner) counterPath() string {
	if !r.cfg.Workload.Kind.HasCounter() {
		return ""
	}
	return r.lockPath + "-counter"
}

// prepareCounter creates the counter holding 0 (with its parents).
func (r *runner) prepareCounter(ctx context.Context) error {
	path := r.counterPath()
	if path == "" {
		return nil
	}
	store, ok := r.svc.(counterStore)
	if !ok {
		return fmt.Errorf("counter: the %s workload needs a service that keeps a counter", r.cfg.Workload.Kind)
	}
	if err := store.MakeCounter(ctx, r.cfg.SessionTimeout, path); err != nil {
		return fmt.Errorf("counter: %w", err)
	}
	return nil
}

// recordCounterFinal reads the counter at the end and records it as a nemesis op,
// so the checker can compare it with the acknowledged increments.
func (r *runner) recordCounterFinal(ctx context.Context) error {
	path := r.counterPath()
	if path == "" {
		return nil
	}
	n, err := r.svc.(counterStore).ReadCounter(ctx, r.cfg.SessionTimeout, path)
	if err != nil {
		return fmt.Errorf("final counter read: %w", err)
	}
	op := histories.NemesisOp(histories.CounterFinal{Value: n}, "")
	op.Key = workloads.CounterKey
	r.rec.record(op)
	r.logf("counter: final value %d", n)
	return nil
}

// recordNemesis writes a fault's start or stop as a nemesis op.
func (r *runner) recordNemesis(ev nemesis.Event) {
	op := histories.NemesisOp(ev.Record(), "")
	r.noteBlind(ev)
	r.rec.record(op)
	r.logf("nemesis: %s %s", op.F, op.Value)
}

// failingOver is a service whose servers may fail over on their own (Redis's
// sentinels, a Redis Cluster): WatchFailovers calls seen with each failover's start
// and stop until ctx ends (at once, where its servers make none), and the run
// records them in the history (recordFailover).
type failingOver interface {
	WatchFailovers(ctx context.Context, seen func(lockservice.Failover))
}

// watchFailovers records the failovers the servers make on their own, if they do,
// until the returned function is called (it waits for the watch to end).
func (r *runner) watchFailovers() (stop func()) {
	fo, ok := r.svc.(failingOver)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		fo.WatchFailovers(ctx, r.recordFailover)
	}()
	return func() { cancel(); <-done }
}

// recordFailover records f as a nemesis "failover" fault's start or stop, with what
// made it in "by": not the nemesis's doing, but read as its failovers are.
func (r *runner) recordFailover(f lockservice.Failover) {
	phase := histories.FStart
	detail := map[string]any{"by": f.By, "primary": f.Primary, "persistence": f.Persistence}
	if f.Stop {
		phase = histories.FStop
		if f.Promoted != "" {
			detail["promoted"] = f.Promoted
		}
		if len(f.Primaries) > 0 {
			detail["primaries"] = f.Primaries
		}
		if f.Aborted {
			detail["aborted"] = true
		}
	}
	op := histories.NemesisOp(histories.Fault{Phase: phase, Class: string(nemesis.ClassFailover), Detail: detail}, "")
	r.rec.record(op)
	r.logf("%s: %s %s", f.By, op.F, op.Value)
}

// workerStarted and workerEnded keep the nemesis's view of live workers current.
func (r *runner) workerStarted(slot int, w *worker) {
	record := func(id string) {
		r.mu.Lock()
		r.sessions[id] = w.Process()
		r.mu.Unlock()
	}
	if id := w.OnSession(record); id != "" {
		record(id)
	}
	r.cluster.setWorker(slot, w)
}

func (r *runner) workerEnded(slot int) { r.cluster.setWorker(slot, nil) }

// sessionEnv is what the run gives each worker session (session.go).
func (r *runner) sessionEnv() sessionEnv {
	return sessionEnv{
		workload: r.cfg.Workload, workers: r.cfg.Workers, bounds: r.cfg.bounds(), finalBound: r.cfg.FinalBound(),
		init: initRequest(r.cfg, r.connect, r.lockPath, r.counterPath()),
		rec:  r.rec, hard: r.hard.done(), logf: r.logf, newProcess: r.newProcess, violated: r.violated,
		renumbered: func(id string, process int) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.sessions[id] = process
		},
		ended:  r.workerEnded,
		placed: r.placed,
		kind:   kind.Of(r.cfg.Service),
	}
}

// placed notes where a worker's lock lives (workloads.LockPlace): the session that
// holds it is the process's, and a lock that goes with its connection makes the
// faults that end sessions say they free it (cluster.KillFreesLocks).
func (r *runner) placed(process int, p workloads.LockPlace) {
	r.mu.Lock()
	if p.Session != "" {
		r.sessions[p.Session] = process
	}
	if r.places == nil {
		r.places = map[int]workloads.LockPlace{}
	}
	r.places[process] = p
	r.mu.Unlock()
	if p.SessionBound() {
		r.cluster.declaredSessionLocks.Store(true)
	}
}

// lock is the lock as its readers read it: the run's path, and the places the
// workers' latest acquires named (a library's own keys, advisory keys, GET_LOCK
// names), in process order.
func (r *runner) lock() lockservice.Lock {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := lockservice.Lock{Path: r.lockPath, Quorum: r.lockQuorum}
	for _, process := range slices.Sorted(maps.Keys(r.places)) {
		l.Places = append(l.Places, r.places[process])
	}
	return l
}

// sessionOwners returns a copy of the session id → process map.
func (r *runner) sessionOwners() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.sessions)
}

// workerView is a current worker as the final phase and the orphan watch see it: its
// slot, where it stands in its lock cycle, and which thinking spell it is in.
type workerView struct {
	slot      int
	state     workloads.State
	idleSpell int64
	// unknownRelease names the worker's latest release if it ended unknown ("": not).
	unknownRelease string
}

// workerViews returns the current workers (one per slot) by process id.
func (r *runner) workerViews() map[int]workerView {
	r.cluster.mu.Lock()
	defer r.cluster.mu.Unlock()
	views := make(map[int]workerView, len(r.cluster.workers))
	for slot, w := range r.cluster.workers {
		v := workerView{slot: slot, state: w.State(), idleSpell: w.idleSpells.Load()}
		if u := w.unknownRelease.Load(); u != nil {
			v.unknownRelease = *u
		}
		views[w.Process()] = v
	}
	return views
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

// slot is one worker slot's life in the workload: worker processes in its namespace,
// one after the other, run lock cycles until ctx ends (a worker whose op ends in info,
// or that crashes, is replaced by a fresh process with a new process id). It then
// hands its session (nil when it has none) to the final phase through w.ended. A slot
// that cannot start workers is a failure of the run (w.broke).
func (r *runner) slot(ctx context.Context, w *workload, slot int) (err error) {
	var s *session
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("worker slot %d panicked: %v\n%s", slot+1, p, debug.Stack())
			r.hard.close()
		}
		if err != nil {
			w.broke.Store(true)
			r.fail(err, "")
			if s != nil {
				s.end()
			}
			s = nil
		}
		w.ended <- endedSlot{slot: slot, s: s}
	}()
	rng := r.slotRNG(slot)
	for ctx.Err() == nil {
		if s == nil || s.dead {
			if s, err = r.restart(ctx, w, s, slot); err != nil {
				return err
			}
			if s == nil {
				continue // ctx ended while starting
			}
		}
		s.loop(ctx, rng)
	}
	return nil
}

// restart ends the slot's dead session (if any) and starts a fresh one; nil, nil when
// ctx ended first.
func (r *runner) restart(ctx context.Context, w *workload, s *session, slot int) (*session, error) {
	if s != nil {
		s.end()
	}
	return r.startSession(ctx, w, slot)
}

// finalTurn takes the session of a slot whose workload ended and lets its worker (a
// fresh one if it has none) take its final cycle. The session is returned with the
// result: it must live until the lock's entries are attributed (judgeLiveness).
func (r *runner) finalTurn(w *workload) (t turn) {
	var e endedSlot
	select {
	case e = <-w.ended:
	case <-r.hard.done():
		return turn{res: finalResult{Reply: histories.FinalNone, Error: "the slot ended before the final phase"}}
	}
	t.s = e.s
	defer func() {
		if p := recover(); p != nil {
			r.fail(fmt.Errorf("worker slot %d panicked in the final phase: %v\n%s", e.slot+1, p, debug.Stack()), "")
			r.hard.close()
			t.res = finalResult{Slot: e.slot + 1, Reply: histories.FinalNone, Error: "the slot panicked"}
		}
	}()
	if t.s == nil || t.s.dead {
		s, err := r.restart(context.Background(), w, t.s, e.slot)
		if t.s = s; err != nil || s == nil {
			return turn{res: finalResult{Slot: e.slot + 1, Reply: histories.FinalNoWorker, Error: fmt.Sprint(err)}, s: s}
		}
	}
	t.res = t.s.finalCycle()
	return t
}

// startSession starts a worker process in the slot and initialises it, retrying a few
// times. It returns nil, nil when ctx ended first.
func (r *runner) startSession(ctx context.Context, w *workload, slot int) (*session, error) {
	for failures := 0; ; {
		if ctx.Err() != nil {
			return nil, nil
		}
		select {
		case <-r.hard.done():
			return nil, nil
		default:
		}
		process := r.newProcess()
		logPath := r.dir.WorkerLog(slot+1, process)
		wk, err := startWorker(r.hosts[slot], slot, process, r.cfg.WorkerArgv, logPath)
		if err != nil {
			return nil, err
		}
		wk.now = r.rec.now
		s := &session{env: r.sessionEnv(), w: wk, key: r.cfg.Workload.Key}
		if err := s.init(); err != nil {
			wk.Kill()
			var refused refusedError
			if errors.As(err, &refused) && !w.started.Load() {
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
		w.started.Store(true)
		r.workerStarted(slot, wk)
		return s, nil
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
