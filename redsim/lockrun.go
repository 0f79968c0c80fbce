package redsim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
)

// LockConfig says what the lock property runs.
type LockConfig struct {
	// Recipe is the lock recipe under test.
	Recipe Recipe
	// Clients is the number of clients; 0 lets each run draw 2 to 4.
	Clients int
	// Instances is the number of independent instances (3 or 5 for RedLock); 0
	// means 1.
	Instances int
	// Key is the lock's key; "" means "redsim-lock".
	Key string
	// TTL is the lock's time to live, handed to the recipe; 0 means one second.
	// Ticks and jumps are drawn in proportion to it.
	TTL time.Duration
	// Without lists step kinds no random step takes.
	Without []StepKind
}

func (c LockConfig) withDefaults() LockConfig {
	if c.Key == "" {
		c.Key = "redsim-lock"
	}
	if c.TTL <= 0 {
		c.TTL = time.Second
	}
	if c.Instances <= 0 {
		c.Instances = 1
	}
	return c
}

// durations are the amounts a tick or a jump is drawn from: fractions and
// multiples of the TTL, the smallest first (rapid shrinks toward it).
func (c LockConfig) durations() []time.Duration {
	t := c.TTL
	return []time.Duration{t / 100, t / 10, t / 4, t / 2, t, 2 * t}
}

// FailureKind says which property a run broke.
type FailureKind = simsched.FailureKind

// The properties.
const (
	// FailExclusion: two clients believed they held the lock at once.
	FailExclusion = simsched.FailExclusion
	// FailLiveness: with faults off, a client did not acquire within the bound.
	FailLiveness = simsched.FailLiveness
	// FailOrphan: once every client was idle, the lock key was left with no
	// expiry: nobody will ever acquire again.
	FailOrphan = simsched.FailOrphan
	// FailHarness: the recipe or the run misbehaved otherwise (a constructor
	// error, a goroutine that never ends).
	FailHarness = simsched.FailHarness
)

// Failure is a broken property: which, and how.
type Failure = simsched.Failure

func failf(kind FailureKind, format string, args ...any) *Failure {
	return simsched.Failf(kind, format, args...)
}

// maxRun bounds the requests one StepRun serves.
const maxRun = 64

// lockRun is one run of the lock property.
type lockRun struct {
	cfg LockConfig
	sim *Sim
	simsched.Procs[*lockClient]
	steps []Step
	trace []string
	logf  func(string, ...any)
	// leftOut are the kinds this run's random steps leave out (swarm testing).
	leftOut map[StepKind]bool
	live    bool
	torn    bool
	// owner[i] is the process whose request last wrote the lock key on instance
	// i (nil: none since it was lost).
	owner []*lockClient
	// fair[i] is when instance i's lock key expires by the clock of the run, as
	// its TTL said when it was written (zero: no key, or no expiry).
	fair []time.Time
	// written[i] is when owner[i] wrote it.
	written []time.Time
}

// lockClient is one process of a run.
type lockClient struct {
	*simsched.Process[Hold]
	c    *Client
	lock Locker
	// since is when the hold began.
	since time.Time
	// excused: a fault (a restart, a clock jump) took the holder's key from enough
	// instances that no recipe could keep its lock; others acquired since.
	excused bool
	others  []string
	// faultLost: a fault took a key this process wrote since its acquire began
	// (its grant may still be on its way); acquiredFrom is when that acquire began.
	faultLost    bool
	acquiredFrom time.Time
	// spanned: others held while it was excused, and it holds again unaware.
	spanned []string
	// liveAcq counts the acquires of the liveness phase that ended with the lock.
	liveAcq int
}

// lockOp is an operation in flight.
type lockOp = simsched.Op[Hold]

// newLockRun starts a run with n clients, each with its Locker built.
func newLockRun(cfg LockConfig, n int, logf func(string, ...any)) (*lockRun, error) {
	cfg = cfg.withDefaults()
	r := &lockRun{cfg: cfg, sim: New(cfg.Instances), logf: logf, Procs: simsched.Procs[*lockClient]{Slots: make([]*lockClient, n)}, leftOut: map[StepKind]bool{},
		owner: make([]*lockClient, cfg.Instances), fair: make([]time.Time, cfg.Instances), written: make([]time.Time, cfg.Instances)}
	r.note("%s with %d clients on %d instances, key %s, TTL %s", cfg.Recipe.Name, n, cfg.Instances, cfg.Key, cfg.TTL)
	for i := range n {
		if err := r.startProcess(i); err != nil {
			return r, err
		}
	}
	return r, nil
}

// note adds a line to the trace.
func (r *lockRun) note(format string, args ...any) {
	l := fmt.Sprintf(format, args...)
	r.trace = append(r.trace, l)
	if r.logf != nil {
		r.logf("%s", l)
	}
}

// setupBound bounds the requests a constructor may send.
const setupBound = 100

// startProcess starts a new process in slot and builds its Locker, serving its
// requests as they come.
func (r *lockRun) startProcess(slot int) error {
	lc := &lockClient{Process: simsched.NewProcess[Hold](len(r.All), slot, r.Slots[slot] != nil)}
	lc.c = r.sim.NewClient(lc.Name)
	env := Env{Key: r.cfg.Key, TTL: r.cfg.TTL, client: lc.c, OnLost: lc.OnLost,
		// Formatted at once: collect sorts them.
		Logf: func(format string, args ...any) { lc.Logf("%s", fmt.Sprintf(format, args...)) },
	}
	for i := range r.cfg.Instances {
		env.Addrs = append(env.Addrs, Addr(i))
	}
	var lock Locker
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		lock, err = r.cfg.Recipe.New(env)
	}()
	r.sim.Settle()
	for i := 0; ; i++ {
		select {
		case <-done:
		default:
			if i == setupBound || !r.sim.CanRun(lc.c) {
				return failf(FailHarness, "building %s's lock: it neither returned nor sent a request (%d served)", lc.Name, i)
			}
			r.sim.Serve(lc.c, Reply)
			continue
		}
		break
	}
	if err != nil {
		return failf(FailHarness, "building %s's lock: %v", lc.Name, err)
	}
	lc.lock = lock
	lc.StartWorker()
	if r.Add(slot, lc) {
		r.note("       %s: new process %d", lc.Name, lc.ID)
	}
	return nil
}

// can reports whether step kind can target t now.
func (r *lockRun) can(kind StepKind, t int) bool {
	switch kind {
	case StepTick:
		return true
	case StepJump, StepRestart:
		return t < r.cfg.Instances
	}
	if t >= len(r.Slots) {
		return false
	}
	lc := r.Slots[t]
	if can, ok := lc.OpStep(string(kind)); ok {
		return can
	}
	switch kind {
	case StepStep, StepRun, StepLoseReply, StepDrop, StepDelay:
		return r.sim.CanRun(lc.c)
	case StepCrash:
		return true
	}
	return false
}

// Targets returns how many targets a step of kind has (clients, instances, or one
// for a tick), and those it can target now.
func (r *lockRun) Targets(kind StepKind) (int, []int) {
	n := len(r.Slots)
	switch kind.Target() {
	case simsched.OnInstance:
		n = r.cfg.Instances
	case simsched.NoTarget:
		n = 1
	}
	var out []int
	for i := range n {
		if r.can(kind, i) {
			out = append(out, i)
		}
	}
	return n, out
}

// Choices returns the kinds among kinds a random step may take now: possible, and
// neither left out by the run nor by the config.
func (r *lockRun) Choices(kinds []StepKind) []StepKind {
	var out []StepKind
	for _, k := range kinds {
		if _, ts := r.Targets(k); !slices.Contains(r.cfg.Without, k) && !r.leftOut[k] && len(ts) > 0 {
			out = append(out, k)
		}
	}
	return out
}

// Durations are what a tick or a jump is drawn from: the config's, and the time
// until just past the lock key's next expiry on an instance (expiryEdge).
func (r *lockRun) Durations() []time.Duration {
	ds := r.cfg.durations()
	if d, ok := r.expiryEdge(); ok && !slices.Contains(ds, d) {
		ds = append(ds, d)
		slices.Sort(ds)
	}
	return ds
}

// expiryEdge is how long until a millisecond past the soonest expiry of the lock
// key on any instance (Redis deletes a key once its time is strictly past), if a
// key with an expiry lives. Timing bugs live at that edge: a holder that counts
// its validity too generously still believes, and the next client may take the
// key, only in the moments after it expires, which the fixed durations (a
// hundredth of the TTL and up) step over more often than not.
func (r *lockRun) expiryEdge() (time.Duration, bool) {
	soonest, found := time.Duration(0), false
	for _, k := range r.lockKeys() {
		if k.Key != "" && k.TTL >= 0 && (!found || k.TTL < soonest) {
			soonest, found = k.TTL, true
		}
	}
	return soonest + time.Millisecond, found
}

// Clients is the run's number of clients.
func (r *lockRun) Clients() int { return len(r.Slots) }

// Steps are the steps the run took, not those of the liveness phase.
func (r *lockRun) Steps() []Step { return r.steps }

// Schedule renders the run's schedule.
func (r *lockRun) Schedule() string {
	return Schedule{Clients: len(r.Slots), Instances: r.cfg.Instances, Steps: r.steps}.String()
}

// Trace tells the run: each step, the requests it served and their replies, the
// recipe's log lines, the liveness phase.
func (r *lockRun) Trace() []string { return r.trace }

// Do applies one step of the schedule, which must be possible now.
func (r *lockRun) Do(st Step) error {
	if !r.can(st.Kind, st.Target) || (st.Kind == StepTick && st.Target != 0) {
		return fmt.Errorf("step %s is not possible now", st)
	}
	r.steps = append(r.steps, st)
	r.apply(st, fmt.Sprintf("%3d. %v", len(r.steps), st))
	return nil
}

// apply performs a possible step; prefix starts its trace line.
func (r *lockRun) apply(st Step, prefix string) {
	var what string
	// Every step takes stepTime of the clock, so that what two steps start (two
	// clients' requests, their timeouts, their backoffs) never falls due at one
	// instant, where the order of the goroutines it wakes would be the Go
	// scheduler's.
	time.Sleep(stepTime)
	before := r.lockKeys()
	switch st.Kind {
	case StepAcquire:
		r.startAcquire(r.Slots[st.Target])
	case StepRelease:
		r.startRelease(r.Slots[st.Target])
	case StepTimeout:
		op := r.Slots[st.Target].Op
		op.TimedOut = true
		op.Cancel(nil)
		r.sim.Settle()
	case StepStep:
		what, _ = r.sim.Serve(r.Slots[st.Target].c, Reply)
	case StepRun:
		var parts []string
		for i := 0; i < maxRun && r.sim.CanRun(r.Slots[st.Target].c); i++ {
			w, _ := r.sim.Serve(r.Slots[st.Target].c, Reply)
			parts = append(parts, w)
		}
		what = strings.Join(parts, "; ")
	case StepLoseReply:
		what, _ = r.sim.Serve(r.Slots[st.Target].c, LoseReply)
	case StepDrop:
		what, _ = r.sim.Serve(r.Slots[st.Target].c, Drop)
	case StepDelay:
		what, _ = r.sim.Serve(r.Slots[st.Target].c, Delay)
	case StepTick:
		r.sim.Tick(st.D)
	case StepJump:
		r.sim.Jump(st.Target, st.D)
	case StepRestart:
		r.sim.Restart(st.Target)
	case StepCrash:
		r.sim.Crash(r.Slots[st.Target].c)
	}
	if what != "" {
		prefix += ": " + what
	}
	r.note("%s", prefix)
	if st.Kind == StepCrash {
		r.crashed(r.Slots[st.Target])
	}
	r.keysMoved(st, before)
	r.collect()
}

// stepTime is how long a step takes on the clock.
const stepTime = time.Microsecond

// lockKeys returns the lock key on every instance ("" for none).
func (r *lockRun) lockKeys() []KeyInfo {
	out := make([]KeyInfo, r.cfg.Instances)
	for i := range out {
		out[i], _ = r.sim.Key(i, r.cfg.Key)
	}
	return out
}

// keysMoved takes in how a step changed the lock keys: a client step that wrote
// the key makes its client the key's owner there; a fault that took a key away
// (a restart, a clock jump) may excuse its owner (excuse).
func (r *lockRun) keysMoved(st Step, before []KeyInfo) {
	after := r.lockKeys()
	for i := range after {
		switch {
		case after[i].same(before[i]):
			continue
		case after[i].Key == "" && r.owner[i] != nil && r.lostByFault(st, i, before[i]):
			r.note("       the fault took %s's key from i%d", r.owner[i].Name, i)
			if o := r.owner[i]; !r.written[i].Before(o.acquiredFrom) {
				o.faultLost = true // a key of its current acquire, not an earlier one's
			}
			r.owner[i] = nil
			r.excuse()
		case after[i].Key != "" && st.Kind.Target() == simsched.OnClient:
			r.owner[i], r.written[i] = r.Slots[st.Target], time.Now()
		}
		r.fair[i] = time.Time{}
		if after[i].Key == "" {
			r.owner[i] = nil
		} else if after[i].TTL >= 0 {
			r.fair[i] = time.Now().Add(after[i].TTL)
		}
	}
	r.unexcuse()
}

// lostByFault reports whether the lock key that instance i had before step st
// was taken by a fault: a restart, or a clock jump (at the jump, or later by an
// expiry earlier than its TTL said when it was written: the instance's clock ran
// ahead). A key deleted by a request, or expired in its time, was not.
func (r *lockRun) lostByFault(st Step, i int, before KeyInfo) bool {
	switch {
	case st.Kind == StepRestart || st.Kind == StepJump:
		return true
	case before.TTL < 0 || before.TTL > max(st.D, stepTime)+time.Millisecond:
		return false // no expiry due in this step: a request deleted it
	}
	return !r.fair[i].IsZero() && time.Now().Add(time.Millisecond).Before(r.fair[i])
}

// backing is how many instances hold a key lc wrote last, since its last acquire
// began (a key it wrote for an earlier hold, not expired yet, is not this hold's).
func (r *lockRun) backing(lc *lockClient) int {
	n := 0
	for i, o := range r.owner {
		if o == lc && !r.written[i].Before(lc.acquiredFrom) {
			n++
		}
	}
	return n
}

// quorum is the number of instances a holder's key must be on.
func (r *lockRun) quorum() int { return r.cfg.Instances/2 + 1 }

// excuse marks the holders a fault left without their key on a majority: no
// recipe can keep its lock then, and another client may acquire it. The holder is
// excused from mutual exclusion until it learns (its hold ends) or its key is
// back (unexcuse).
func (r *lockRun) excuse() {
	for _, lc := range r.Slots {
		if lc.Holding && !lc.excused && lc.faultLost && r.backing(lc) < r.quorum() {
			lc.excused, lc.others = true, nil
			r.note("       %s is excused while it does not know: no recipe keeps a lock whose key the servers lost", lc.Name)
		}
	}
}

// unexcuse ends the excuse of holders whose key is back on a majority (their own
// request wrote it again): they count as holders again, and if another client
// acquired meanwhile the lock was not theirs throughout, though they were never
// told (checkExclusion fails).
func (r *lockRun) unexcuse() {
	for _, lc := range r.Slots {
		if !lc.Holding {
			lc.excused = false // its hold ended: the recipe learnt, or let go
		}
		if lc.excused && r.backing(lc) >= r.quorum() {
			lc.excused = false
			r.note("       %s's key is back; it counts as a holder again", lc.Name)
			if len(lc.others) > 0 {
				lc.spanned = lc.others
			}
		}
	}
}

// start runs f in lc's goroutine as its op, and settles.
func (r *lockRun) start(lc *lockClient, op *lockOp, f func() (Hold, error)) {
	lc.Start(op, f)
	r.sim.Settle()
}

func (r *lockRun) startAcquire(lc *lockClient) {
	lc.faultLost, lc.acquiredFrom = false, time.Now()
	ctx, cancel := context.WithCancelCause(context.Background())
	r.start(lc, &lockOp{F: simsched.OpAcquire, Cancel: cancel}, func() (Hold, error) {
		defer cancel(nil)
		return lc.lock.Acquire(ctx)
	})
}

func (r *lockRun) startRelease(lc *lockClient) {
	lc.Holding = false // the belief ends at the release's call
	r.start(lc, &lockOp{F: simsched.OpRelease}, func() (Hold, error) { return Hold{}, lc.lock.Release() })
}

// crashed replaces a crashed process with a new one.
func (r *lockRun) crashed(lc *lockClient) {
	lc.Crashed, lc.Holding, lc.LostHold = true, false, false
	if err := r.startProcess(lc.Slot); err != nil {
		panic(err) // the recipe built this slot's first Locker; it must build another
	}
}

// collect takes in what the recipe goroutines did since the last step: log lines,
// completed ops, lost events; and ends beliefs whose declared validity passed.
func (r *lockRun) collect() {
	for _, n := range r.sim.TakeNotes() {
		r.note("       sim| %s", n)
	}
	for _, lc := range r.All {
		lines, lost, done := lc.Take()
		// Two goroutines of a process woken at one instant (RedLock's requests
		// timing out together) log in the Go scheduler's order; the log lines
		// start with the bubble's time, so sorted they are in time order.
		logs := make([]string, len(lines))
		for i, l := range lines {
			logs[i] = l.String()
		}
		slices.Sort(logs)
		for _, l := range logs {
			r.note("       %s| %s", lc.Name, l)
		}
		if lc.Crashed {
			continue
		}
		if done != nil {
			lc.Op = nil
			r.complete(lc, done)
		}
		for _, reason := range lost {
			if lc.Holding && lc.Op == nil {
				r.note("       %s: told it lost the lock: %s", lc.Name, reason)
				lc.Holding, lc.LostHold = false, true
			}
		}
		if lc.Holding && !lc.Hold.Until.IsZero() && !time.Now().Before(lc.Hold.Until) {
			r.note("       %s: its declared validity ended", lc.Name)
			lc.Holding, lc.LostHold = false, true
		}
	}
}

// complete takes in the end of lc's op.
func (r *lockRun) complete(lc *lockClient, op *lockOp) {
	switch {
	case op.F == simsched.OpAcquire && op.Err == nil:
		lc.Holding, lc.Hold, lc.LostHold, lc.since = true, op.Hold, false, time.Now()
		lc.excused, lc.others, lc.spanned = lc.faultLost && r.backing(lc) < r.quorum(), nil, nil
		if lc.excused {
			r.note("       %s is excused while it does not know: a fault took its key before its grant arrived", lc.Name)
		}
		for _, o := range r.Slots {
			if o != lc && o.excused {
				o.others = append(o.others, lc.Name)
			}
		}
		if r.live {
			lc.liveAcq++
		}
		until := ""
		if !op.Hold.Until.IsZero() {
			until = fmt.Sprintf(", valid for %s", time.Until(op.Hold.Until))
		}
		r.note("       %s: acquired (token %d%s)", lc.Name, op.Hold.Token, until)
	case op.F == simsched.OpAcquire:
		r.note("       %s: acquire failed: %v", lc.Name, op.Err)
	case op.Err == nil:
		lc.LostHold = false
		r.note("       %s: released", lc.Name)
	default:
		lc.LostHold = false
		r.note("       %s: release failed: %v", lc.Name, op.Err)
	}
}

// CheckExclusion is the invariant checked after every step: at most one client
// believes it holds the lock.
func (r *lockRun) CheckExclusion() error {
	var who []string
	for _, lc := range r.Slots {
		if lc.Holding && len(lc.spanned) > 0 {
			return failf(FailExclusion, "%s holds again once its key is back, though %s held while a fault had taken it, and it was never told it lost the lock",
				lc.Name, strings.Join(lc.spanned, " and "))
		}
		if lc.Holding && !lc.excused {
			who = append(who, fmt.Sprintf("%s (holding for %s)", lc.Name, time.Since(lc.since).Round(time.Millisecond)))
		}
	}
	if len(who) < 2 {
		return nil
	}
	return failf(FailExclusion, "%s believe they hold the lock at once; none released, was told it lost it, or passed the validity it declared",
		strings.Join(who, " and "))
}

// The bounds of the liveness phase: its time in TTLs (a lock left by a fault
// expires within one; the clients then take turns), and its steps.
const (
	liveTTLs  = 4
	liveSteps = 50000
)

// Finish ends a run: the liveness phase (faults off; every client acquires and
// releases at least once more within liveTTLs TTLs), then the orphan
// check: once every client is idle, the lock key must not be left without expiry.
func (r *lockRun) Finish() error {
	r.note("liveness phase: faults off")
	r.live = true
	start := time.Now()
	for n := 0; ; n++ {
		st, ok := r.nextLive(n)
		if !ok {
			break
		}
		if n == liveSteps || time.Since(start) > liveTTLs*r.cfg.TTL {
			return failf(FailLiveness, "with faults off, the clients are not done after %s (%d steps): %s",
				time.Since(start).Round(time.Millisecond), n, r.state())
		}
		if st.Kind == StepTick {
			r.liveTick()
			continue
		}
		r.apply(st, "     "+st.String())
		if err := r.CheckExclusion(); err != nil {
			return err
		}
	}
	r.note("liveness phase: done")
	for i := range r.cfg.Instances {
		for _, k := range r.sim.Keys(i) {
			if k.Key == r.cfg.Key && k.TTL < 0 {
				return failf(FailOrphan, "every client is idle, yet instance %d holds the lock key %s = %q with no expiry: nobody can ever acquire it",
					i, k.Key, k.Value)
			}
		}
	}
	return nil
}

// liveTick moves the clock a hundredth of the TTL at a time until a recipe does
// something (a request, an op's end, a lost event), and at most a TTL: the
// liveness phase lets no request wait long (the recipes' shortest request
// timeout, RedLock's, is a twentieth of the TTL).
func (r *lockRun) liveTick() {
	before := r.sim.Requests()
	start := time.Now()
	keys := r.lockKeys()
	for time.Since(start) < r.cfg.TTL && r.sim.Requests() == before && !r.anyDone() {
		r.sim.Tick(r.cfg.TTL / 100)
	}
	r.note("     tick %s", time.Since(start))
	r.keysMoved(Step{Kind: StepTick, D: time.Since(start)}, keys)
	r.collect()
}

// anyDone reports whether an op ended or a lost event came since the last collect.
func (r *lockRun) anyDone() bool {
	for _, lc := range r.Slots {
		if lc.Pending() {
			return true
		}
	}
	return false
}

// nextLive picks the liveness phase's next step: serve requests (round robin from
// a rotating start), release holds, start acquires of clients that have not
// acquired in the phase yet, and tick when only timers are left.
func (r *lockRun) nextLive(n int) (Step, bool) {
	for _, kind := range []StepKind{StepStep, StepRelease, StepAcquire} {
		for i := range r.Slots {
			slot := (n + i) % len(r.Slots)
			lc := r.Slots[slot]
			if kind == StepAcquire && lc.liveAcq > 0 {
				continue
			}
			if r.can(kind, slot) {
				return Step{Kind: kind, Target: slot}, true
			}
		}
	}
	for _, lc := range r.Slots {
		if lc.Op != nil {
			return Step{Kind: StepTick}, true
		}
	}
	return Step{}, false
}

// state describes the clients and the keys, for a failure message.
func (r *lockRun) state() string {
	var parts []string
	for _, lc := range r.Slots {
		s := lc.Name + ": idle"
		switch {
		case lc.Op != nil:
			s = lc.Name + ": in " + lc.Op.F
		case lc.Holding:
			s = lc.Name + ": holding"
		}
		parts = append(parts, s)
	}
	for i := range r.cfg.Instances {
		var keys []string
		for _, k := range r.sim.Keys(i) {
			keys = append(keys, fmt.Sprintf("%s=%q ttl %s", k.Key, k.Value, k.TTL))
		}
		parts = append(parts, fmt.Sprintf("i%d: %s", i, strings.Join(keys, ", ")))
	}
	return strings.Join(parts, "; ")
}

// afterTicks is the seconds a teardown lets pass once every connection is broken.
const afterTicks = 3

// teardownTicks bounds the ticks a teardown waits for recipe goroutines to end.
const teardownTicks = 20

// Teardown ends every op, closes every Locker (serving what they send meanwhile),
// breaks every connection, and waits for every recipe goroutine to end.
func (r *lockRun) Teardown() error {
	if r.torn {
		return nil
	}
	r.torn = true
	for _, lc := range r.All {
		if lc.Op != nil && lc.Op.Cancel != nil {
			lc.Op.Cancel(nil)
		}
	}
	r.drain()
	var wg sync.WaitGroup
	for _, lc := range r.All {
		if lc.lock != nil {
			wg.Go(lc.lock.Close)
		}
	}
	closed := make(chan struct{})
	go func() { wg.Wait(); close(closed) }()
	r.sim.Settle()
	for i := 0; i < teardownTicks; i++ {
		select {
		case <-closed:
			i = teardownTicks
			continue
		default:
		}
		r.drain()
		r.sim.Tick(r.cfg.TTL / 4)
	}
	r.sim.Shutdown()
	for _, lc := range r.All {
		lc.StopWorker()
	}
	// A client library's own goroutines may sleep before they notice their client
	// is closed (go-redis's pool retries a failed dial every second), and a bubble
	// must end with no goroutine left.
	for range afterTicks {
		r.sim.Tick(time.Second)
	}
	select {
	case <-closed:
	default:
		return failf(FailHarness, "a Locker's Close did not return once every connection was broken")
	}
	return nil
}

// drain serves every process's pending requests until none is left (bounded).
func (r *lockRun) drain() {
	for range maxRun {
		any := false
		for _, lc := range r.All {
			if r.sim.CanRun(lc.c) {
				r.sim.Serve(lc.c, Reply)
				any = true
			}
		}
		if !any {
			return
		}
	}
}
