package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// sessionEnv is what a session needs of its run, and no more (runner.sessionEnv
// builds it): what the workers do, how long their replies may take, the history and
// its clock, the hard stop, and where to tell the run what it must know.
type sessionEnv struct {
	workload workloads.Config
	// workers is the number of worker slots (a regime may idle some).
	workers int
	bounds  driver.Bounds
	// finalBound is how long a final acquire may take (Config.FinalBound).
	finalBound time.Duration
	// init is the run's init request: a session adds its worker's process.
	init workloads.Request
	// rec writes the history and keeps the run's clock.
	rec *recorder
	// hard is closed when waiting for in-flight ops must end (runner.hard).
	hard <-chan struct{}
	logf func(string, ...any)
	// newProcess hands out a history process id.
	newProcess func() int
	// violated notes a worker's breach of the protocol (runner.violated).
	violated func(process int, err error)
	// renumbered says that session id now belongs to process.
	renumbered func(sessionID string, process int)
	// ended says that the slot's worker is gone (runner.workerEnded).
	ended func(slot int)
	// placed says where process's latest grant lives, as its worker said
	// (runner.placed); kind is the run's kind, whose places it may name.
	placed func(process int, p workloads.LockPlace)
	kind   kind.Kind
}

// workerConnect is what a worker's init names for it to reach the service: the
// servers (Service.Connect), or the sentinels and the name they know the primary by;
// redisCluster says the servers are a Redis Cluster's instances.
type workerConnect struct {
	servers        string
	sentinelMaster string
	redisCluster   bool
}

// sentinelled is a service whose workers find the primary through Redis Sentinels
// (Redis's sentinel topology): Sentinels returns their addresses and the primary's
// name ("" when the service has none).
type sentinelled interface {
	Sentinels() (connect, master string)
}

// redisClustered is a service whose servers may be a Redis Cluster (Redis's cluster
// topology), whose workers must send each key to the primary that serves its slot.
type redisClustered interface {
	RedisCluster() bool
}

// lockKeyed is a service whose leader is where the run's lock lives (a Redis
// Cluster's primary of the lock key's slot): the run names its lock path before
// the workload.
type lockKeyed interface {
	SetLockKey(path string)
}

// initRequest is a run's init request: where the lock is and what the workers do.
func initRequest(cfg Config, connect workerConnect, lockPath, counterPath string) workloads.Request {
	wl := cfg.Workload
	return workloads.Request{
		Op: workloads.OpInit, Connect: connect.servers, SentinelMaster: connect.sentinelMaster, RedisCluster: connect.redisCluster,
		SessionTimeoutMS: cfg.SessionTimeout.Milliseconds(),
		Path:             lockPath, Kind: string(wl.Kind), Permits: wl.Permits,
		CounterPath: counterPath, Fenced: wl.Fenced, WriteRetryMS: max(0, wl.WriteRetry.Milliseconds()),
		Protocol: workloads.ProtocolVersion,
	}
}

// session is one worker process's life: it drives the workload's lock cycles through
// the worker and owns the process's history entries.
type session struct {
	env sessionEnv
	w   *worker
	key string

	// cycle is the lock cycle in progress (nil between cycles): whether the worker
	// holds the lock is the cycle's to say.
	cycle *workloads.Cycle
	// step is the request in flight, if any (the key and mode its ops carry).
	step workloads.Step
	// dead: the process crashed or must not be used again (after info).
	dead bool
}

// end stops the session's worker: politely unless it is dead.
func (s *session) end() {
	s.env.ended(s.w.slot)
	if s.dead {
		s.w.Kill()
	} else {
		s.w.Close(2 * time.Second)
	}
}

// publish makes the worker's place in its cycle visible to the nemesis and the orphan
// watch.
func (s *session) publish() {
	state := workloads.Between
	if s.cycle != nil {
		state = s.cycle.State()
	}
	if state != workloads.Holding {
		s.w.holdEnd.Store(0)
	}
	s.w.setState(state)
}

// op builds an op of the request in flight.
func (s *session) op(t histories.Type, f string) histories.Op {
	return histories.Op{Type: t, F: f, Process: histories.Client(s.w.Process()), Key: s.step.Key, Mode: s.step.Mode}
}

// lockOp builds an op on the lock's own key, in the cycle's mode.
func (s *session) lockOp(t histories.Type, f string) histories.Op {
	op := histories.Op{Type: t, F: f, Process: histories.Client(s.w.Process()), Key: s.key}
	if s.cycle != nil {
		op.Mode = s.cycle.Mode()
	}
	return op
}

// init sends the init request; it is not part of the history.
func (s *session) init() error {
	req := s.env.init
	req.Worker = s.w.Process()
	if _, err := s.w.send(req); err != nil {
		return err
	}
	reply, crashed := s.await(s.env.bounds.InitReplyLimit())
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
	if reply.Protocol >= workloads.ProtocolV2 {
		s.w.protocol = min(reply.Protocol, workloads.ProtocolVersion)
		return s.syncClock()
	}
	return nil
}

// await waits for the reply to the request in flight, handling events meanwhile. It
// returns a non-nil error when the worker crashed, broke the protocol (a reply to
// another request), did not answer within limit, or the run ended hard; the worker is
// then unusable.
func (s *session) await(limit time.Duration) (workloads.Message, error) {
	m, err := s.w.Await(driver.Wait{Limit: limit, Stop: s.env.hard,
		OnEvent: func(m workloads.Message) { s.event(m, true) }})
	return m.Msg, s.failed(err, "run ended before the reply came")
}

// failed turns what ended a wait for the worker into the error that ends the worker:
// a breach of the protocol is reported, the run's hard end says stopped.
func (s *session) failed(err error, stopped string) error {
	var v *driver.Violation
	switch {
	case errors.As(err, &v):
		return s.violation(v)
	case errors.Is(err, driver.ErrStopped):
		return errors.New(stopped)
	}
	return err
}

// unrequested handles line m of the worker's (from Lines) while no request is in
// flight: an event, a crash, or a reply nobody asked for (a protocol violation: the
// worker is treated as crashed). It reports whether the worker is still usable.
func (s *session) unrequested(m driver.Msg) bool {
	switch m = s.w.Match(m); m.Kind {
	case driver.Event:
		s.event(m.Msg, false)
	default: // nothing is in flight: any other line ends the worker
		s.crash("", s.failed(m.Err, ""))
	}
	return !s.dead
}

// violation logs a worker's breach of the protocol and returns it as the error that
// ends the worker.
func (s *session) violation(v *driver.Violation) error {
	s.env.logf("worker %d: %v", s.w.Process(), v)
	s.env.violated(s.w.Process(), v)
	return v
}

// event handles an event from the worker: a lost event may end its hold, a renewed
// event is recorded (whatever the worker holds: the cause reads it against the holds).
func (s *session) event(m workloads.Message, inFlight bool) {
	switch m.Event {
	case workloads.EventRenewed:
		s.env.rec.record(histories.NemesisOp(histories.Renewal{Process: s.w.Process(), Key: s.key}, ""))
		return
	case workloads.EventLost:
	default:
		return
	}
	if inFlight || s.cycle == nil || s.cycle.State() != workloads.Holding {
		// Nothing certain to end: the op in flight (if any) decides.
		s.env.logf("worker %d: lost event while not holding (ignored): %s", s.w.Process(), m.Error)
		return
	}
	s.lose(m, s.env.rec.now())
}

// lose ends the cycle's hold as lost event m says, at time at: a release that
// completed at that moment, lost.
func (s *session) lose(m workloads.Message, at int64) {
	inv := s.lockOp(histories.Invoke, histories.FRelease)
	inv.Lost, inv.Error = true, m.Error
	s.env.rec.recordAt(inv, at)
	done := s.lockOp(histories.OK, histories.FRelease)
	done.Lost, done.Error = true, m.Error
	s.env.rec.recordAt(done, at)
	s.cycle.Lost()
	s.publish()
}

// crash records the end of a worker that died or must be abandoned: its open op
// completes as info; a hold it had ends at some unknown time from now (a release
// invoke now, completed as info; or at the end of a v3 hold if that came first, for
// the worker may have begun its release unreported; or when a fault killed it, if
// that came first: a database frees a dead session's locks at once).
func (s *session) crash(openOp string, why error) {
	s.dead = true
	killed := s.w.killedAt.Load()
	nested := openOp == histories.FAcquire && s.step.Key == s.key && s.cycle != nil && s.cycle.State() == workloads.Holding
	switch {
	case nested && killed != 0:
		// A fault killed the worker while it held and asked for a nested level: the
		// nested acquire can leave nothing held by a dead worker, and the outer level
		// ends below, at the kill. (Recorded info, it would keep the outer level held
		// for ever: a process acts no more after an info completion, so no release
		// could follow it, and the next grant to another would read as an overlap.)
		op := s.op(histories.Fail, openOp)
		op.Error = "the worker was killed with this nested acquire in flight: " + why.Error()
		s.env.rec.recordAt(op, killed)
		openOp = ""
	case openOp != "":
		op := s.op(histories.Info, openOp)
		op.Error = why.Error()
		s.env.rec.record(op)
	}
	// A hold that was on ends at some unknown time from now. (When the open op was on
	// the lock's key it settles the hold; a counter read or write leaves the lock held,
	// released here on the lock's key.)
	if s.cycle != nil && s.cycle.State() == workloads.Holding && (openOp == "" || s.step.Key != s.key) {
		at := s.env.rec.now()
		if end := s.w.holdEnd.Load(); end != 0 {
			at = min(at, end)
		}
		if killed != 0 {
			at = min(at, killed) // a dead process holds nothing
		}
		s.env.rec.recordAt(s.lockOp(histories.Invoke, histories.FRelease), at)
		op := s.lockOp(histories.Info, histories.FRelease)
		op.Error = why.Error()
		s.env.rec.record(op)
	}
	s.cycle = nil
	s.step = workloads.Step{}
	s.publish()
}

// do performs one recorded request step: invoke (with its value), request, and the
// completion the reply says; the cycle hears the reply. A crash completes the op as
// info; an info reply makes the worker unusable.
func (s *session) do(step workloads.Step, limit time.Duration) (workloads.Message, bool) {
	s.invoked(step, s.env.rec.now())
	if _, err := s.w.send(step.Request); err != nil {
		s.crash(step.F, fmt.Errorf("write to worker: %w", err))
		return workloads.Message{}, false
	}
	reply, err := s.await(limit)
	if err != nil {
		s.crash(step.F, err)
		return workloads.Message{}, false
	}
	s.completed(step, reply, s.env.rec.now())
	return reply, true
}

// invoked records step's invoke (with its value) at t and makes it the step in flight.
func (s *session) invoked(step workloads.Step, t int64) {
	s.step = step
	inv := s.op(histories.Invoke, step.F)
	inv.Value = step.Value
	s.env.rec.recordAt(inv, t)
}

// completed records the completion of the step in flight at t, as reply says, and
// tells the cycle; after an info reply the worker goes on under a new process id or
// is unusable.
func (s *session) completed(step workloads.Step, reply workloads.Message, t int64) {
	op := s.op(histories.Type(reply.Type), step.F)
	op.Error = reply.Error
	if reply.Type == workloads.ReplyOK && step.F == histories.FAcquire && reply.Lock != nil {
		s.placed(*reply.Lock)
	}
	if reply.Type == workloads.ReplyOK {
		switch {
		case len(reply.Token) > 0:
			op.Value = json.RawMessage(`{"token":` + string(reply.Token) + `}`)
		case reply.Value != nil:
			op.Value = strconv.AppendInt(nil, *reply.Value, 10)
		}
	}
	s.env.rec.recordAt(op, t)
	s.step = workloads.Step{}
	if step.F == histories.FRelease && step.Key == s.key {
		s.w.noteRelease(reply, t)
	}
	if reply.Type == workloads.ReplyInfo {
		if s.keepsAfter(step) {
			s.renumber()
		} else {
			s.dead = true
		}
	}
	s.cycle.Done(reply)
	s.publish()
}

// placed notes where the lock the worker was just granted lives, as it said: the
// nemesis aims at its session (cluster.client), the run maps that session to the
// process.
func (s *session) placed(p workloads.LockPlace) {
	if err := p.Within(s.env.kind, s.env.init.Path); err != nil {
		s.env.violated(s.w.Process(), err)
		return
	}
	s.w.place.Store(&p)
	if s.env.placed != nil {
		s.env.placed(s.w.Process(), p)
	}
}

// keepsAfter says whether the worker goes on after step ended with an unknown
// outcome (Workload.KeepAfterInfo): only after the cycle's first acquire or its
// outermost release, when the cycle holds nothing certain either way. (After a counter
// read or write the worker still holds the lock, and a nested acquire leaves outer
// levels held: those workers are replaced.)
func (s *session) keepsAfter(step workloads.Step) bool {
	if !s.env.workload.KeepAfterInfo || step.Key != s.key {
		return false
	}
	state := s.cycle.State()
	return state == workloads.Acquiring || state == workloads.Releasing
}

// renumber keeps the worker, its OS process and its ZooKeeper session, under a new
// history process id: the old one ended with an op whose outcome is unknown, and the
// history never uses such a process again. This is how applications keep their lock
// clients after a failed call, and what the bugs that need a session to outlive a
// failed call (an orphan node of a lost create reply) need to show.
func (s *session) renumber() {
	old, next := s.w.Process(), s.env.newProcess()
	s.w.process.Store(int64(next))
	if id, _ := s.w.Session(); id != "" {
		s.env.renumbered(id, next)
	}
	s.env.logf("worker process %d goes on as process %d (same OS process and session) after an unknown outcome", old, next)
}

// loop runs lock cycles until the run's time is up or the worker is unusable; a
// cycle's wait and hold are cut to what is left of the workload (ctx's deadline).
func (s *session) loop(ctx context.Context, rng *rand.Rand) {
	wl := s.env.workload
	limit := func(step workloads.Step) time.Duration {
		return s.env.bounds.ReplyLimit(max(wl.AcquireTimeout, time.Duration(step.Request.TimeoutMS)*time.Millisecond))
	}
	for ctx.Err() == nil && !s.dead {
		elapsed := s.env.rec.elapsed()
		if out := wl.SitsOut(s.w.slot, s.env.workers, elapsed); out > 0 {
			s.sitOut(ctx, out)
			continue
		}
		began := time.Now()
		c := wl.NewCycle(rng, elapsed)
		if end, ok := ctx.Deadline(); ok {
			c.FitIn(time.Until(end)) // the workload's end ends its waits and holds
		}
		s.runCycle(c, limit)
		if !s.dead {
			think := wl.Think(rng, s.env.rec.elapsed())
			if !c.Granted() {
				think = max(think, workloads.RefusedPause-time.Since(began))
			}
			s.think(think)
		}
	}
}

// sitOut idles a worker slot that takes no part in the workload's current regime,
// until the regime ends or the run's time is up.
func (s *session) sitOut(ctx context.Context, d time.Duration) {
	if end, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(end))
	}
	s.think(max(d, time.Millisecond))
}

// runCycle drives one lock cycle to its end (or the worker's); limit says how long
// each request's reply may take.
func (s *session) runCycle(c *workloads.Cycle, limit func(workloads.Step) time.Duration) {
	s.cycle = c
	defer func() {
		s.cycle = nil
		s.publish()
	}()
	if plan, ok := c.Plan(); ok && s.w.protocol >= 2 {
		s.runPlanned(plan, limit)
		return
	}
	for !s.dead {
		step, more := c.Next()
		s.publish()
		if !more {
			return
		}
		if step.IsHold() {
			s.hold(step.Hold)
			if s.cycle != nil {
				c.Done(workloads.Message{})
			}
			continue
		}
		s.do(step, limit(step))
	}
}

// think waits between two lock cycles, handling events; the nemesis may aim at a
// thinking worker (its next request is an acquire).
func (s *session) think(d time.Duration) {
	if d <= 0 {
		return
	}
	s.w.idleSpells.Add(1)
	s.w.setState(workloads.Thinking)
	defer s.publish()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case m := <-s.w.Lines():
			if !s.unrequested(m) {
				return
			}
		case <-s.env.hard:
			return
		}
	}
}

// hold sleeps while holding, handling events; the worker may crash or report lost.
// The hold is not cut short when the run's time is up: release comes after it. A
// stopped worker (SIGSTOP, a "GC pause") cannot end its critical section, so its hold
// lasts at least until it runs again: only a running worker is sent its next op
// (resumeMidHold).
func (s *session) hold(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			if s.w.Stopped() {
				s.resumeMidHold()
			}
			return
		case m := <-s.w.Lines():
			if !s.heldAfter(m) {
				return
			}
		case <-s.env.hard:
			s.crash("", errors.New("run ended while holding"))
			return
		}
	}
}

// heldAfter handles a message that came while holding (a crash, or an event such as
// lost) and says whether the worker still holds.
func (s *session) heldAfter(m driver.Msg) bool {
	return s.unrequested(m) && s.cycle != nil && s.cycle.State() == workloads.Holding
}

// resumeMidHold waits, without handling the worker's events, until a worker stopped
// in its critical section runs again. Like a program after a GC pause, it carries on
// where it was at once (its write, its release) before anything it hears on resuming
// (a lost lock) can stop it; such an event arrives while that op is in flight, and
// the op's outcome decides. Events sent before the stop are handled first.
func (s *session) resumeMidHold() {
	for drained := false; !drained; {
		select {
		case m := <-s.w.Lines():
			if !s.heldAfter(m) {
				return
			}
		default:
			drained = true
		}
	}
	for s.w.Stopped() {
		select {
		case <-s.env.hard:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}
