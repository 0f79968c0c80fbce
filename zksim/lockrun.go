package zksim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// LockConfig says what the lock property runs.
type LockConfig struct {
	// Recipe is the lock recipe under test.
	Recipe Recipe
	// Clients is the number of clients; 0 lets each run draw 2 to 5.
	Clients int
	// Path is the lock's znode; "" means /zksim/lock.
	Path string
	// Tick is how far StepTick moves the clock; 0 means one second (more than any
	// retry pause of zlc-mutex).
	Tick time.Duration
	// Without lists fault kinds no step takes, for a recipe whose story leaves a
	// fault out (go-zookeeper's zk.Lock, whose holder never hears of a lost session
	// in time, is checked for its orphan without expiry, say).
	Without []StepKind
	// StrictCleanup leaves out the extra acquire and release that every client makes
	// in the liveness phase when lock nodes are left, so that a node a client left
	// behind (a lost hold whose release could not delete it, say) is an orphan even
	// if the recipe would delete it at that client's next acquire.
	StrictCleanup bool
}

func (c LockConfig) withDefaults() LockConfig {
	if c.Path == "" {
		c.Path = "/zksim/lock"
	}
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	return c
}

// FailureKind says which property a run broke.
type FailureKind = simsched.FailureKind

// The properties.
const (
	// FailExclusion: two clients held the lock at once, neither told it was lost and
	// both nodes on the servers.
	FailExclusion = simsched.FailExclusion
	// FailModel: the recorded history is not linearizable for models' mutex.
	FailModel = simsched.FailModel
	// FailLiveness: with faults off, a waiting client did not acquire in time, or is
	// blocked forever.
	FailLiveness = simsched.FailLiveness
	// FailOrphan: lock nodes were left over once every client was idle, or once every
	// session was gone.
	FailOrphan = simsched.FailOrphan
	// FailHarness: the recipe or the run misbehaved otherwise (a constructor error, a
	// goroutine that never ends, a structurally bad history).
	FailHarness = simsched.FailHarness
)

// Failure is a broken property: which, and how.
type Failure = simsched.Failure

// failf makes a failure. Protected names' random GUIDs are masked: a failure must
// read the same in every replay of its run (rapid compares them).
func failf(kind FailureKind, format string, args ...any) *Failure {
	return &Failure{Kind: kind, Msg: maskGUIDs(fmt.Sprintf(format, args...))}
}

// maxRun bounds the requests of one StepRun.
const maxRun = 64

// lockRun is one run of the lock property: a Sim, one Locker per client, the history
// recorded the way the real harness records it, and the trace.
type lockRun struct {
	cfg LockConfig
	sim *Sim
	// Procs are the run's processes: a process that crashed or was retired is
	// replaced by a new one, with a new process number.
	simsched.Procs[*lockClient]
	hist  histories.History
	steps []Step
	// trace is the run's story: steps, what they did, the recipe's log lines.
	trace []line
	// logf, when set, gets each trace line as it is written.
	logf func(format string, args ...any)
	// torn is set once teardown ran.
	torn bool
	// leftOut are the step kinds this run's random steps leave out (swarm testing).
	leftOut map[StepKind]bool
	// live is set in the liveness phase; liveFail is its first failed acquire;
	// cycling, once every client is to acquire and release once more.
	live     bool
	cycling  bool
	liveFail *Failure
}

// lockClient is one process of a run (a client with its Locker) and what the run
// knows of it.
type lockClient struct {
	*simsched.Process[Hold]
	c    *Client
	lock Locker
	guid int
	// retired: an op ended as info; the client's session was closed.
	retired bool
	// closed is closed once the Locker's Close, which teardown starts, returned.
	closed chan struct{}
	// cycled: the liveness phase started this client's last acquire.
	cycled bool
}

func (lc *lockClient) dead() bool { return lc.Crashed || lc.retired }

// lockOp is an operation of a client, running in its own goroutine.
type lockOp = simsched.Op[Hold]

// newLockRun starts a run with n clients, each with its Locker built.
func newLockRun(cfg LockConfig, n int, logf func(string, ...any)) (*lockRun, error) {
	cfg = cfg.withDefaults()
	sim := New()
	if cfg.Recipe.NewConn != nil {
		sim = NewWire()
	}
	r := &lockRun{cfg: cfg, sim: sim, logf: logf, Procs: simsched.Procs[*lockClient]{Slots: make([]*lockClient, n)}}
	r.note("%s with %d clients, lock %s", cfg.Recipe.Name, n, cfg.Path)
	for i := range n {
		if err := r.startProcess(i); err != nil {
			return r, err
		}
	}
	return r, nil
}

// startProcess starts a new process in slot: a new client, with a new session, and
// its Locker.
func (r *lockRun) startProcess(slot int) error {
	lc := &lockClient{Process: simsched.NewProcess[Hold](len(r.All), slot, r.Slots[slot] != nil)}
	onLost, logf := lc.OnLost, lc.Logf
	newGUID := func() string {
		lc.guid++
		return fmt.Sprintf("p%dg%d", lc.ID, lc.guid)
	}
	var lock Locker
	var err error
	if r.cfg.Recipe.NewConn != nil {
		lc.c = r.sim.NewWireClient(lc.Name)
		lock, err = r.cfg.Recipe.NewConn(ConnEnv{
			Servers:   []string{WireAddress},
			Path:      r.cfg.Path,
			OnLost:    onLost,
			Logf:      logf,
			NewGUID:   newGUID,
			transport: lc.c.ZKOption(nil),
			client:    lc.c,
		})
		r.sim.Settle() // the first connection
	} else {
		lc.c = r.sim.NewClient(lc.Name)
		lock, err = r.cfg.Recipe.New(LockEnv{
			Client:  lc.c,
			Path:    r.cfg.Path,
			OnLost:  onLost,
			NewGUID: newGUID,
			Logf:    logf,
		})
	}
	if err != nil {
		return failf(FailHarness, "building %s's lock: %v", lc.Name, err)
	}
	lc.lock = lock
	lc.StartWorker()
	if r.Add(slot, lc) {
		r.note("       %s: new process %d, session 0x%x", lc.Name, lc.ID, uint64(r.sim.Session(lc.c).ID))
	}
	return nil
}

// line is a line of a trace, formatted only when printed.
type line struct {
	format string
	args   []any
}

func (l line) String() string { return fmt.Sprintf(l.format, l.args...) }

// note adds a line to the trace.
func (r *lockRun) note(format string, args ...any) {
	r.trace = append(r.trace, line{format, args})
	if r.logf != nil {
		r.logf(format, args...)
	}
}

// Trace renders the trace.
func (r *lockRun) Trace() []string {
	out := make([]string, len(r.trace))
	for i, l := range r.trace {
		out[i] = l.String()
	}
	return out
}

// record appends an op to the history; times are the op's position.
func (r *lockRun) record(op histories.Op) {
	op.Index = int64(len(r.hist))
	op.Time = int64(len(r.hist))
	r.hist = append(r.hist, op)
}

func (r *lockRun) recordOp(lc *lockClient, t histories.Type, f string, edit ...func(*histories.Op)) {
	op := histories.Op{Type: t, F: f, Process: histories.Client(lc.ID)}
	for _, e := range edit {
		e(&op)
	}
	r.record(op)
}

// enabled returns the clients (slots) that can take a step of kind now; StepTick,
// which names no client, is [0] when possible.
func (r *lockRun) enabled(kind StepKind) []int {
	if kind == StepTick {
		if r.can(kind, 0) {
			return []int{0}
		}
		return nil
	}
	var ids []int
	for i := range r.Slots {
		if r.can(kind, i) {
			ids = append(ids, i)
		}
	}
	return ids
}

// Targets returns the clients a random step of kind is drawn from, and those that
// can take it now (enabled).
func (r *lockRun) Targets(kind StepKind) (int, []int) { return len(r.Slots), r.enabled(kind) }

// Durations is nil: no step is timed.
func (r *lockRun) Durations() []time.Duration { return nil }

// Clients is the run's number of clients.
func (r *lockRun) Clients() int { return len(r.Slots) }

// Steps are the steps the run took, not those of the liveness phase.
func (r *lockRun) Steps() []Step { return r.steps }

// Schedule renders the run's schedule.
func (r *lockRun) Schedule() string { return Schedule{Clients: len(r.Slots), Steps: r.steps}.String() }

// can reports whether slot can take a step of kind now. StepTick is possible while
// some op is in flight (a timer may be waiting).
func (r *lockRun) can(kind StepKind, slot int) bool {
	s, lc := r.sim, r.Slots[slot]
	if can, ok := lc.OpStep(string(kind)); ok {
		return can
	}
	switch kind {
	case StepStep, StepRun, StepLoseReply:
		return s.CanRun(lc.c)
	case StepDeliver:
		return s.CanDeliver(lc.c)
	case StepReconnect:
		return s.CanReconnect(lc.c)
	case StepDrop:
		return s.Session(lc.c).State == zlcmutex.StateConnected
	case StepExpire:
		return r.expirable(slot) != nil
	case StepCrash:
		return true
	case StepTick:
		return r.anyBusy()
	}
	return false
}

// anyBusy reports whether some client has an op in flight.
func (r *lockRun) anyBusy() bool {
	for _, lc := range r.Slots {
		if lc.Op != nil {
			return true
		}
	}
	return false
}

// OptionalKinds lists the step kinds that a random run may leave out altogether
// (swarm testing): a run without releases builds long queues, one whose only fault is
// expiry expires often. Each run of CheckLock draws which to leave out.
func OptionalKinds() []StepKind {
	return []StepKind{StepRelease, StepTimeout, StepLoseReply, StepDrop, StepExpire, StepCrash}
}

// Choices returns the kinds among kinds that a random step may take now: possible
// for some client and not left out by the run, unless nothing but a tick would be
// possible, in which case the left-out kinds are allowed too (a run must not stall).
func (r *lockRun) Choices(kinds []StepKind) []StepKind {
	var out []StepKind
	for _, k := range kinds {
		if slices.Contains(r.cfg.Without, k) {
			continue
		}
		if len(r.enabled(k)) > 0 && (!r.leftOut[k] || r.stalled()) {
			out = append(out, k)
		}
	}
	return out
}

// stalled reports whether, but for left-out kinds, only a tick is possible.
func (r *lockRun) stalled() bool {
	for _, k := range StepKinds() {
		if k != StepTick && !r.leftOut[k] && len(r.enabled(k)) > 0 {
			return false
		}
	}
	return true
}

// expirable is the process whose session "expire c<slot>" ends: the oldest crashed
// process of the slot whose session still lives, or else the slot's process if its
// session lives; nil when there is none.
func (r *lockRun) expirable(slot int) *lockClient {
	for _, p := range r.All {
		if p.Slot == slot && p.Crashed && r.sim.SessionAlive(p.c) {
			return p
		}
	}
	if lc := r.Slots[slot]; r.sim.SessionAlive(lc.c) {
		return lc
	}
	return nil
}

// Do applies one step of the schedule, which must be possible now, then takes in what
// the recipe did.
func (r *lockRun) Do(st Step) error {
	if st.Target < 0 || st.Target >= len(r.Slots) || (st.Kind == StepTick && st.Target != 0) {
		return fmt.Errorf("step %s: no client c%d", st, st.Target)
	}
	if !r.can(st.Kind, st.Target) {
		return fmt.Errorf("step %s is not possible now", st)
	}
	r.steps = append(r.steps, st)
	return r.apply(st, line{"%3d. %v", []any{len(r.steps), st}})
}

// apply performs a step that is possible now; prefix starts its trace line.
func (r *lockRun) apply(st Step, prefix line) error {
	lc := r.Slots[st.Target]
	var what Trace
	var err error
	switch st.Kind {
	case StepAcquire:
		r.startAcquire(lc)
	case StepRelease:
		r.startRelease(lc)
	case StepTimeout:
		lc.Op.TimedOut = true
		lc.Op.Cancel(context.DeadlineExceeded)
		r.sim.Settle()
	case StepStep:
		what, err = r.sim.Run(lc.c)
	case StepRun:
		var parts []any
		for i := 0; i < maxRun && err == nil && r.sim.CanRun(lc.c); i++ {
			var w Trace
			w, err = r.sim.Run(lc.c)
			parts = append(parts, w)
		}
		what = tracef(strings.Repeat("; %v", len(parts))[2:], parts...)
	case StepDeliver:
		what, err = r.sim.Deliver(lc.c)
	case StepTick:
		r.sim.Tick(r.cfg.Tick)
	case StepReconnect:
		what, err = r.sim.Reconnect(lc.c)
	case StepLoseReply:
		what, err = r.sim.LoseReply(lc.c)
	case StepDrop:
		what, err = r.sim.Drop(lc.c)
	case StepExpire:
		p := r.expirable(st.Target)
		what, err = r.sim.Expire(p.c)
		if p != lc {
			what = tracef("%v (of crashed %s)", what, p.Name)
		}
	case StepCrash:
		what, err = r.sim.Crash(lc.c)
	}
	if err != nil {
		return fmt.Errorf("step %s: %w", st, err)
	}
	if what.format != "" {
		r.note("%v: %v", prefix, what)
	} else {
		r.note("%v", prefix)
	}
	if st.Kind == StepCrash {
		r.crashed(lc)
	}
	r.collect()
	return nil
}

// start runs f in lc's goroutine as its op, and waits until everything blocks.
func (r *lockRun) start(lc *lockClient, op *lockOp, f func() (Hold, error)) {
	lc.Start(op, f)
	r.sim.Settle()
}

func (r *lockRun) startAcquire(lc *lockClient) {
	ctx, cancel := context.WithCancelCause(context.Background())
	r.recordOp(lc, histories.Invoke, histories.FAcquire)
	r.start(lc, &lockOp{F: histories.FAcquire, Cancel: cancel, Live: r.live}, func() (Hold, error) {
		defer cancel(nil)
		return lc.lock.Acquire(ctx)
	})
}

func (r *lockRun) startRelease(lc *lockClient) {
	r.recordOp(lc, histories.Invoke, histories.FRelease)
	lc.Holding = false // the certain part of the hold ends at the release's invoke
	r.start(lc, &lockOp{F: histories.FRelease}, func() (Hold, error) {
		return Hold{}, lc.lock.Release()
	})
}

// crashed records a crash, as the harness records a worker that died: the open op
// completes as info, and a hold ends at some unknown time from now (a release invoked
// now, completed as info). A new process takes the slot.
func (r *lockRun) crashed(lc *lockClient) {
	lc.Crashed = true
	if lc.Op != nil {
		r.recordOp(lc, histories.Info, lc.Op.F, func(op *histories.Op) { op.Error = "crashed" })
	}
	if lc.Holding {
		r.recordOp(lc, histories.Invoke, histories.FRelease)
		r.recordOp(lc, histories.Info, histories.FRelease, func(op *histories.Op) { op.Error = "crashed while holding" })
	}
	lc.Holding, lc.LostHold = false, false
	r.restart(lc)
}

// restart gives dead lc's slot a new process.
func (r *lockRun) restart(lc *lockClient) {
	if err := r.startProcess(lc.Slot); err != nil {
		panic(err) // the recipe built this slot's first Locker; it must build another
	}
}

// collect takes in, process by process, what the recipe goroutines did since the
// last step: log lines, completed ops, lost events.
func (r *lockRun) collect() {
	for _, n := range r.sim.TakeNotes() {
		r.note("       wire| %s", n)
	}
	for i := 0; i < len(r.All); i++ { // a retirement may start a process
		lc := r.All[i]
		logs, lost, done := lc.Take()
		for _, l := range logs {
			r.note("       %s| %v", lc.Name, l)
		}
		if lc.dead() {
			if done != nil {
				lc.Op = nil // nobody is there to hear it
			}
			continue
		}
		if done != nil {
			lc.Op = nil
			r.complete(lc, done)
		}
		for _, reason := range lost {
			if !lc.Holding || lc.Op != nil {
				r.note("       %s: lost event while not holding (ignored): %s", lc.Name, reason)
				continue
			}
			r.recordOp(lc, histories.Invoke, histories.FRelease, func(op *histories.Op) { op.Lost, op.Error = true, reason })
			r.recordOp(lc, histories.OK, histories.FRelease, func(op *histories.Op) { op.Lost, op.Error = true, reason })
			r.note("       %s: told it lost the lock: %s", lc.Name, reason)
			lc.Holding, lc.LostHold = false, true
		}
	}
}

// complete records the end of lc's op.
func (r *lockRun) complete(lc *lockClient, op *lockOp) {
	t := histories.OK
	switch {
	case op.Err == nil:
	case r.cfg.Recipe.Definite(op.Err):
		t = histories.Fail
	default:
		t = histories.Info
	}
	r.recordOp(lc, t, op.F, func(o *histories.Op) {
		if op.Err != nil {
			o.Error = op.Err.Error()
		}
		if t == histories.OK && op.F == histories.FAcquire {
			o.Value = json.RawMessage(`{"token":` + strconv.FormatInt(op.Hold.Token, 10) + `}`)
		}
	})
	switch {
	case t == histories.OK && op.F == histories.FAcquire:
		if op.Hold.Node == "" && r.cfg.Recipe.NewConn != nil {
			op.Hold.Node = r.ownNode(lc)
		}
		lc.Holding, lc.Hold, lc.LostHold = true, op.Hold, false
		r.note("       %s: acquired %s (token %d)", lc.Name, op.Hold.Node, op.Hold.Token)
	case op.F == histories.FAcquire:
		r.note("       %s: acquire %s: %v", lc.Name, t, op.Err)
		// A wire client's library fails the calls in flight when it hears of an
		// earlier fault (go-zookeeper fails them all when its session expired): only
		// its acquires started with faults off must end with the lock.
		wireExcused := r.cfg.Recipe.NewConn != nil && !op.Live
		if r.live && !op.TimedOut && r.liveFail == nil && !wireExcused {
			r.liveFail = failf(FailLiveness, "with faults off, %s's acquire ended without the lock: %s: %v", lc.Name, t, op.Err)
		}
	case t == histories.OK:
		lc.LostHold = false
		r.note("       %s: released", lc.Name)
	default:
		lc.LostHold = false
		r.note("       %s: release %s: %v", lc.Name, t, op.Err)
	}
	if t == histories.Info {
		// The harness retires a worker after info: its session ends, and a new worker
		// takes its place.
		lc.retired, lc.Holding, lc.LostHold = true, false, false
		w, _ := r.sim.Close(lc.c)
		r.note("       %s: retired after info: %v", lc.Name, w)
		r.restart(lc)
	}
}

// ownNode is the lock node a wire client holds by, for a recipe that does not say
// (go-zookeeper's zk.Lock does not): its session's lowest ephemeral child of the
// lock path, or "" when it has none.
func (r *lockRun) ownNode(lc *lockClient) string {
	sid := r.sim.Session(lc.c).ID
	var best string
	var bestSeq int64 = -1
	for _, name := range r.sim.Children(r.cfg.Path) {
		p := r.cfg.Path + "/" + name
		st, _, ok := r.sim.Node(p)
		if !ok || st.EphemeralOwner != sid {
			continue
		}
		if bestSeq < 0 || st.Czxid < bestSeq {
			best, bestSeq = p, st.Czxid
		}
	}
	return best
}

// CheckExclusion is the invariant checked after every step: at most one client holds
// among those that have not been told they lost the lock and whose node the servers
// still have.
func (r *lockRun) CheckExclusion() error {
	var holders []*lockClient
	for _, lc := range r.Slots {
		if !lc.Holding {
			continue
		}
		if lc.Hold.Node != "" {
			if _, _, ok := r.sim.Node(lc.Hold.Node); !ok {
				continue
			}
		}
		holders = append(holders, lc)
	}
	if len(holders) < 2 {
		return nil
	}
	var who []string
	for _, lc := range holders {
		who = append(who, fmt.Sprintf("%s holds %s (token %d)", lc.Name, lc.Hold.Node, lc.Hold.Token))
	}
	msg := strings.Join(who, " and ") + "; none was told it lost the lock, and the servers have all these nodes"
	// models' mutex checker must agree that the history so far is not linearizable.
	res, err := models.Check(r.hist, models.Config{Kind: models.Mutex})
	switch {
	case err != nil:
		return failf(FailHarness, "%s; and the recorded history is malformed: %v", msg, err)
	case res.Verdict != models.Invalid:
		return failf(FailHarness, "%s; but models' mutex checker finds the history %s (it must agree)", msg, res.Verdict)
	}
	return failf(FailExclusion, "%s (models agrees: %s)", msg, witness(res))
}

func witness(res models.Result) string {
	for _, k := range res.Keys {
		if k.Witness != "" {
			return k.Witness
		}
	}
	return string(res.Verdict)
}

// liveBound is the number of steps the liveness phase may take per client.
const liveBound = 100

// Finish ends a run: the liveness phase, the orphan checks, and the check of the
// history by models.
//
// The liveness phase turns faults off: crashed clients' sessions expire, cut-off
// clients reconnect, and the clients are driven fairly (watch events first, then
// requests round robin, then releases) until every op has ended and nobody holds.
// If lock nodes are left then, or a waiting client cannot go on, every client makes
// one more acquire and release, as the harness's workers keep cycling (a recipe may
// clean up what a failed release left behind in its next acquire), unless
// cfg.StrictCleanup. Every acquire of the
// phase must end with the lock (but those timed out before it), within liveBound
// steps per client.
func (r *lockRun) Finish() error {
	r.note("liveness phase: faults off")
	r.live = true
	for _, p := range r.All {
		if p.Crashed && r.sim.SessionAlive(p.c) {
			w, _ := r.sim.Expire(p.c)
			r.note("     expire %s (crashed): %v", p.Name, w)
			r.collect()
		}
	}
	bound := liveBound * len(r.Slots)
	steps := 0
	for ; r.liveFail == nil; steps++ {
		st, ok := r.nextLive(steps)
		if !ok && r.cycle("lock nodes are left") {
			continue
		}
		if !ok {
			break
		}
		if steps == bound {
			return failf(FailLiveness, "with faults off, the clients are still busy after %d steps: %s", bound, r.state())
		}
		if st.Kind == StepTick {
			before := r.progress()
			r.sim.Tick(r.cfg.Tick)
			r.collect()
			if r.progress() != before {
				r.note("     tick")
				continue
			}
			if r.cycle(r.busy() + " cannot go on") {
				continue
			}
			return failf(FailLiveness, "with faults off, %s is blocked forever: no request pending, no watch event to deliver, and no timer wakes it (%s)",
				r.busy(), r.state())
		}
		if st.Kind == StepAcquire {
			r.Slots[st.Target].cycled = true
		}
		if err := r.apply(st, line{"     %v", []any{st}}); err != nil {
			return failf(FailHarness, "liveness phase: %v", err)
		}
		if err := r.CheckExclusion(); err != nil {
			return err
		}
	}
	if r.liveFail != nil {
		return r.liveFail
	}
	r.note("liveness phase: done in %d steps", steps)
	if left := r.sim.Children(r.cfg.Path); len(left) > 0 {
		return failf(FailOrphan, "every client is idle, yet lock nodes are left: %s", r.describeNodes(left))
	}
	if err := r.Teardown(); err != nil {
		return err
	}
	if left := r.sim.Children(r.cfg.Path); len(left) > 0 {
		return failf(FailOrphan, "every session is gone, yet lock nodes are left: %s", r.describeNodes(left))
	}
	if left := r.sim.Ephemerals(); len(left) > 0 {
		return failf(FailHarness, "every session is gone, yet ephemeral nodes are left: %s", strings.Join(left, " "))
	}
	if err := histories.Validate(r.hist); err != nil {
		return failf(FailHarness, "the recorded history is malformed: %v", err)
	}
	res, err := models.Check(r.hist, models.Config{Kind: models.Mutex})
	if err != nil {
		return failf(FailHarness, "models cannot check the history: %v", err)
	}
	if res.Verdict != models.Valid {
		return failf(FailModel, "models' mutex checker finds the history %s: %s", res.Verdict, witness(res))
	}
	return nil
}

// cycle starts the liveness phase's extra acquire and release of every client, when
// the run allows it and it has not started yet; why says what calls for it.
func (r *lockRun) cycle(why string) bool {
	if r.cycling || r.cfg.StrictCleanup || len(r.sim.Children(r.cfg.Path)) == 0 {
		return false
	}
	r.note("liveness phase: %s; every client acquires and releases once more", why)
	r.cycling = true
	return true
}

// nextLive picks the liveness phase's next step, fairly: reconnect whoever is cut
// off, deliver events, run requests (round robin from a rotating start), release
// holds, start the last acquires, and tick when only timers are left. ok is false
// when there is nothing left to do.
func (r *lockRun) nextLive(n int) (Step, bool) {
	for _, kind := range []StepKind{StepReconnect, StepDeliver, StepStep, StepRelease, StepAcquire} {
		for i := range r.Slots {
			slot := (n + i) % len(r.Slots)
			lc := r.Slots[slot]
			if kind == StepAcquire && (!r.cycling || lc.cycled || lc.LostHold) {
				continue
			}
			if r.can(kind, slot) {
				return Step{Kind: kind, Target: slot}, true
			}
		}
	}
	if r.anyBusy() {
		return Step{Kind: StepTick}, true
	}
	return Step{}, false
}

// busy names the clients with an op in flight, or returns "".
func (r *lockRun) busy() string {
	var names []string
	for _, lc := range r.Slots {
		if lc.Op != nil {
			names = append(names, fmt.Sprintf("%s's %s", lc.Name, lc.Op.F))
		}
	}
	return strings.Join(names, ", ")
}

// progress is a measure that grows whenever a recipe does anything.
func (r *lockRun) progress() int { return r.sim.Requests() + len(r.hist) }

// state describes the clients and the lock's queue, for a failure message.
func (r *lockRun) state() string {
	var parts []string
	for _, lc := range r.Slots {
		st := r.sim.Session(lc.c)
		s := fmt.Sprintf("%s: session 0x%x %s", lc.Name, uint64(st.ID), st.State)
		switch {
		case lc.Op != nil:
			s += ", in " + lc.Op.F
		case lc.Holding:
			s += ", holding " + lc.Hold.Node
		default:
			s += ", idle"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ") + "; lock nodes: " + r.describeNodes(r.sim.Children(r.cfg.Path))
}

// describeNodes names lock nodes with their owners.
func (r *lockRun) describeNodes(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	var parts []string
	for _, name := range names {
		st, _, ok := r.sim.Node(r.cfg.Path + "/" + name)
		if !ok {
			continue
		}
		owner := "persistent"
		if st.EphemeralOwner != 0 {
			owner = fmt.Sprintf("session 0x%x", uint64(st.EphemeralOwner))
			for _, p := range r.All {
				if r.sim.Session(p.c).ID == st.EphemeralOwner {
					owner += " of " + p.Name
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", name, owner))
	}
	return strings.Join(parts, ", ")
}

// opsRunning reports whether some process's op has not returned yet.
func (r *lockRun) opsRunning() bool {
	for _, lc := range r.All {
		if lc.Running() {
			return true
		}
	}
	return false
}

// allClosed reports whether every Locker's Close returned.
func (r *lockRun) allClosed() bool {
	for _, lc := range r.All {
		if !lc.hasClosed() {
			return false
		}
	}
	return true
}

// hasClosed reports whether lc's Close returned.
func (lc *lockClient) hasClosed() bool {
	select {
	case <-lc.closed:
		return true
	default:
		return false
	}
}

// errTeardown ends the acquires still running when a run is torn down.
var errTeardown = errors.New("run over")

// Teardown closes every client and waits for every recipe goroutine to end. It is
// safe to call more than once.
func (r *lockRun) Teardown() error {
	if r.torn {
		return nil
	}
	r.torn = true
	for _, lc := range r.All {
		if !r.sim.Dead(lc.c) {
			r.sim.Close(lc.c)
		}
		if lc.Op != nil && lc.Op.Cancel != nil {
			lc.Op.Cancel(errTeardown)
		}
	}
	for _, lc := range r.All {
		if r.sim.SessionAlive(lc.c) {
			r.sim.Expire(lc.c) // a crashed process's session
		}
		lc.StopWorker()
	}
	r.sim.Settle()
	// A wire recipe's ops may wait on their library's timers to end (go-zookeeper
	// gives a close a second); they must end before Close is called, which may take
	// the same library locks (zk.Conn.Close holds a sync.Once's mutex meanwhile,
	// and a goroutine waiting on a mutex keeps the bubble from settling).
	for i := 0; r.cfg.Recipe.NewConn != nil && i < 5 && r.opsRunning(); i++ {
		r.sim.Tick(time.Second)
	}
	for _, lc := range r.All {
		closed, lock := make(chan struct{}), lc.lock
		lc.closed = closed
		go func() {
			lock.Close()
			close(closed)
		}()
	}
	r.sim.Settle()
	// A wire client's library may wait on its own timers to close (go-zookeeper
	// gives its close request a second).
	for i := 0; r.cfg.Recipe.NewConn != nil && i < 5 && !r.allClosed(); i++ {
		r.sim.Tick(time.Second)
	}
	var stuck []string
	for _, lc := range r.All {
		if lc.Running() {
			stuck = append(stuck, lc.Name+"'s "+lc.Op.F)
		}
		if !lc.hasClosed() {
			stuck = append(stuck, lc.Name+"'s close")
		}
	}
	if len(stuck) > 0 {
		return failf(FailHarness, "still blocked after every client was closed: %s", strings.Join(stuck, ", "))
	}
	return nil
}
