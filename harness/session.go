package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// session is one worker process's life: it drives the workload's lock cycles through
// the worker and owns the process's history entries.
type session struct {
	r   *runner
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
	s.r.workerEnded(s.w.slot)
	if s.dead {
		s.w.kill()
	} else {
		s.w.close(2 * time.Second)
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
	wl := s.r.cfg.Workload
	id, err := s.w.send(workloads.Request{
		Op: workloads.OpInit, Connect: s.r.connect, SessionTimeoutMS: s.r.cfg.SessionTimeout.Milliseconds(),
		Path: s.r.lockPath, Kind: string(wl.Kind), Permits: wl.Permits, Worker: s.w.Process(),
		CounterPath: s.r.counterPath(), Fenced: wl.Fenced, WriteRetryMS: max(0, wl.WriteRetry.Milliseconds()),
		Protocol: workloads.ProtocolVersion,
	})
	if err != nil {
		return err
	}
	reply, crashed := s.await(id, s.r.cfg.InitReplyLimit())
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

// await waits for the reply to request id, handling events meanwhile. It returns a
// non-nil error when the worker crashed, broke the protocol (a reply to another
// request), did not answer within limit, or the run ended hard; the worker is then
// unusable.
func (s *session) await(id int64, limit time.Duration) (workloads.Message, error) {
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
			if *m.msg.ID != id {
				return workloads.Message{}, s.violation(m, fmt.Sprintf("a reply with id %d while request %d was in flight", *m.msg.ID, id))
			}
			if m.msg.IsReport() {
				return workloads.Message{}, s.violation(m, fmt.Sprintf("a step report to request %d, which is not a cycle", id))
			}
			return m.msg, nil
		case <-timer.C:
			return workloads.Message{}, fmt.Errorf("no reply within %s", limit)
		case <-s.hard():
			return workloads.Message{}, errors.New("run ended before the reply came")
		}
	}
}

func (s *session) hard() <-chan struct{} { return s.r.hard.done() }

// unrequested handles a message that came with no request in flight: an event, a
// crash, or a reply nobody asked for (a protocol violation: the worker is treated
// as crashed). It reports whether the worker is still usable.
func (s *session) unrequested(m workerMsg) bool {
	switch {
	case m.crashed != nil:
		s.crash("", m.crashed)
	case m.msg.Event == "":
		s.crash("", s.violation(m, fmt.Sprintf("a reply with id %d while no request was in flight", *m.msg.ID)))
	default:
		s.event(m.msg, false)
	}
	return !s.dead
}

// violation logs a worker's breach of the protocol and returns it as the error that
// ends the worker.
func (s *session) violation(m workerMsg, what string) error {
	err := fmt.Errorf("protocol violation: %s: %s", what, truncate(bytes.TrimSpace(m.line), 200))
	s.r.logf("worker %d: %v", s.w.Process(), err)
	s.r.violated(s.w.Process(), err)
	return err
}

// event handles an event from the worker.
func (s *session) event(m workloads.Message, inFlight bool) {
	if m.Event != workloads.EventLost {
		return
	}
	if inFlight || s.cycle == nil || s.cycle.State() != workloads.Holding {
		// Nothing certain to end: the op in flight (if any) decides.
		s.r.logf("worker %d: lost event while not holding (ignored): %s", s.w.Process(), m.Error)
		return
	}
	s.lose(m, s.r.rec.now())
}

// lose ends the cycle's hold as lost event m says, at time at: a release that
// completed at that moment, lost.
func (s *session) lose(m workloads.Message, at int64) {
	inv := s.lockOp(histories.Invoke, histories.FRelease)
	inv.Lost, inv.Error = true, m.Error
	s.r.rec.recordAt(inv, at)
	done := s.lockOp(histories.OK, histories.FRelease)
	done.Lost, done.Error = true, m.Error
	s.r.rec.recordAt(done, at)
	s.cycle.Lost()
	s.publish()
}

// crash records the end of a worker that died or must be abandoned: its open op
// completes as info; a hold it had ends at some unknown time from now (a release
// invoke now, completed as info; or at the end of a v3 hold if that came first, for
// the worker may have begun its release unreported).
func (s *session) crash(openOp string, why error) {
	s.dead = true
	if openOp != "" {
		op := s.op(histories.Info, openOp)
		op.Error = why.Error()
		s.r.rec.record(op)
	}
	// A hold that was on ends at some unknown time from now. (When the open op was on
	// the lock's key it settles the hold; a counter read or write leaves the lock held,
	// released here on the lock's key.)
	if s.cycle != nil && s.cycle.State() == workloads.Holding && (openOp == "" || s.step.Key != s.key) {
		at := s.r.rec.now()
		if end := s.w.holdEnd.Load(); end != 0 {
			at = min(at, end)
		}
		s.r.rec.recordAt(s.lockOp(histories.Invoke, histories.FRelease), at)
		op := s.lockOp(histories.Info, histories.FRelease)
		op.Error = why.Error()
		s.r.rec.record(op)
	}
	s.cycle = nil
	s.step = workloads.Step{}
	s.publish()
}

// do performs one recorded request step: invoke (with its value), request, and the
// completion the reply says; the cycle hears the reply. A crash completes the op as
// info; an info reply makes the worker unusable.
func (s *session) do(step workloads.Step, limit time.Duration) (workloads.Message, bool) {
	s.invoked(step, s.r.rec.now())
	id, err := s.w.send(step.Request)
	if err != nil {
		s.crash(step.F, fmt.Errorf("write to worker: %w", err))
		return workloads.Message{}, false
	}
	reply, err := s.await(id, limit)
	if err != nil {
		s.crash(step.F, err)
		return workloads.Message{}, false
	}
	s.completed(step, reply, s.r.rec.now())
	return reply, true
}

// invoked records step's invoke (with its value) at t and makes it the step in flight.
func (s *session) invoked(step workloads.Step, t int64) {
	s.step = step
	inv := s.op(histories.Invoke, step.F)
	inv.Value = step.Value
	s.r.rec.recordAt(inv, t)
}

// completed records the completion of the step in flight at t, as reply says, and
// tells the cycle; after an info reply the worker goes on under a new process id or
// is unusable.
func (s *session) completed(step workloads.Step, reply workloads.Message, t int64) {
	op := s.op(histories.Type(reply.Type), step.F)
	op.Error = reply.Error
	if reply.Type == workloads.ReplyOK {
		switch {
		case len(reply.Token) > 0:
			op.Value = json.RawMessage(`{"token":` + string(reply.Token) + `}`)
		case reply.Value != nil:
			op.Value = strconv.AppendInt(nil, *reply.Value, 10)
		}
	}
	s.r.rec.recordAt(op, t)
	s.step = workloads.Step{}
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

// keepsAfter says whether the worker goes on after step ended with an unknown
// outcome (Workload.KeepAfterInfo): only after the cycle's first acquire or its
// outermost release, when the cycle holds nothing certain either way. (After a counter
// read or write the worker still holds the lock, and a nested acquire leaves outer
// levels held: those workers are replaced.)
func (s *session) keepsAfter(step workloads.Step) bool {
	if !s.r.cfg.Workload.KeepAfterInfo || step.Key != s.key {
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
	old, next := s.w.Process(), s.r.newProcess()
	s.w.process.Store(int64(next))
	if id, _ := s.w.Session(); id != "" {
		s.r.mu.Lock()
		s.r.sessions[id] = next
		s.r.mu.Unlock()
	}
	s.r.logf("worker process %d goes on as process %d (same OS process and session) after an unknown outcome", old, next)
}

// loop runs lock cycles until the run's time is up or the worker is unusable.
func (s *session) loop(ctx context.Context, rng *rand.Rand) {
	wl := s.r.cfg.Workload
	limit := func(step workloads.Step) time.Duration {
		return s.r.cfg.ReplyLimit(max(wl.AcquireTimeout, time.Duration(step.Request.TimeoutMS)*time.Millisecond))
	}
	for ctx.Err() == nil && !s.dead {
		elapsed := s.r.rec.elapsed()
		if out := wl.SitsOut(s.w.slot, s.r.cfg.Workers, elapsed); out > 0 {
			s.sitOut(ctx, out)
			continue
		}
		s.runCycle(wl.NewCycle(rng, elapsed), limit)
		if !s.dead {
			s.think(wl.Think(rng, s.r.rec.elapsed()))
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
		case m := <-s.w.msgs:
			if !s.unrequested(m) {
				return
			}
		case <-s.hard():
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
			if processStopped(s.w.Pid()) {
				s.resumeMidHold()
			}
			return
		case m := <-s.w.msgs:
			if !s.heldAfter(m) {
				return
			}
		case <-s.hard():
			s.crash("", errors.New("run ended while holding"))
			return
		}
	}
}

// heldAfter handles a message that came while holding (a crash, or an event such as
// lost) and says whether the worker still holds.
func (s *session) heldAfter(m workerMsg) bool {
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
		case m := <-s.w.msgs:
			if !s.heldAfter(m) {
				return
			}
		default:
			drained = true
		}
	}
	for processStopped(s.w.Pid()) {
		select {
		case <-s.hard():
			return
		case <-time.After(2 * time.Millisecond):
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
