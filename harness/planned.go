package harness

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Protocol v2: the worker runs a whole lock cycle on its own (workloads.OpCycle) and
// reports each step as it happens, stamped with its own monotonic clock; the harness
// maps those times onto the run's clock (workerClock) and records the ops with them.
// No pipe hop or harness wake-up sits between a grant and the hold, or between the
// hold's end and the release. The harness walks the same workloads.Cycle as in v1,
// step by step as the reports come, so both protocols record the same ops.

// clockSamples is how many clock requests the harness sends a v2 worker after init;
// the one answered fastest gives the offset.
const clockSamples = 5

// workerClock maps a v2 worker's monotonic clock onto the run's (ns since the
// recorder's start). The worker read its clock at some moment between the harness's
// send of a clock request and its read of the reply, so the offset is known to within
// half that round trip (err). Invokes are recorded err earlier and completions err
// later than the mapped time: each recorded interval contains the true one, as in v1
// (where the harness stamps the invoke before sending, the completion after reading).
// Both clocks are the same machine's monotonic clock, so they run at the same rate.
type workerClock struct {
	offset int64 // worker ns - run ns
	err    int64 // bound on the offset's error, ns
}

// invokeAt is the run time to record an invoke the worker stamped mono at.
func (c workerClock) invokeAt(mono int64) int64 { return mono - c.offset - c.err }

// completeAt is the run time to record a completion the worker stamped mono at.
func (c workerClock) completeAt(mono int64) int64 { return mono - c.offset + c.err }

// syncClock measures a v2 worker's clock offset (clockSamples round trips).
func (s *session) syncClock() error {
	best := workerClock{err: math.MaxInt64}
	for range clockSamples {
		t0 := s.r.rec.now()
		id, err := s.w.send(workloads.Request{Op: workloads.OpClock})
		if err != nil {
			return err
		}
		reply, err := s.await(id, s.r.cfg.ReplyLimit(0))
		if err != nil {
			return fmt.Errorf("clock: %w", err)
		}
		t1 := s.r.rec.now()
		if reply.Type != workloads.ReplyOK || reply.MonoNS == nil {
			return fmt.Errorf("clock: want an ok reply with mono_ns, got %s %s", reply.Type, reply.Error)
		}
		if e := (t1 - t0 + 1) / 2; e < best.err {
			best = workerClock{offset: *reply.MonoNS - (t0+t1)/2, err: e}
		}
	}
	s.w.clock = best
	s.r.logf("worker %d: protocol v2, its clock known to within %s", s.w.Process(), time.Duration(best.err))
	return nil
}

// runPlanned sends the cycle's plan (its v2 request) and follows the worker's
// reports through the cycle: each report must be the step the cycle expects next. A
// lost event while holding with nothing in flight ends the cycle (the worker then
// releases nothing); the worker's reply to the plan ends it on the worker's side.
func (s *session) runPlanned(plan workloads.Request, limit func(workloads.Step) time.Duration) {
	c := s.cycle
	id, err := s.w.send(plan)
	if err != nil {
		s.crash("", fmt.Errorf("write to worker: %w", err))
		return
	}
	inFlight := false
	for !s.dead {
		step, _ := c.Next()
		s.publish()
		wait := limit(step)
		if step.IsHold() {
			wait += step.Hold
		}
		m, err := s.awaitReport(id, wait, inFlight)
		openOp := ""
		if inFlight {
			openOp = step.F
		}
		if err != nil {
			s.crash(openOp, err)
			return
		}
		// An event may have ended the cycle meanwhile (lost while holding).
		step, more := c.Next()
		if !m.msg.IsReport() {
			if more {
				s.crash(openOp, s.violation(m, fmt.Sprintf("cycle %d: the reply came before its %s", id, expected(step, inFlight))))
			}
			return
		}
		if more && step.IsHold() && m.msg.Step == workloads.StepInvoke {
			c.Done(workloads.Message{})
			step, more = c.Next()
		}
		if !more || !matches(m.msg, step, inFlight) {
			want := "reply (the cycle is over)"
			if more {
				want = expected(step, inFlight)
			}
			s.crash(openOp, s.violation(m, fmt.Sprintf("cycle %d: want its %s", id, want)))
			return
		}
		if !inFlight {
			s.invoked(step, s.w.clock.invokeAt(*m.msg.MonoNS))
			inFlight = true
			continue
		}
		reply := workloads.Message{Type: m.msg.Step, Error: m.msg.Error, Token: m.msg.Token}
		s.completed(step, reply, s.w.clock.completeAt(*m.msg.MonoNS))
		inFlight = false
	}
}

// expected words what a cycle expects next, for a violation's message.
func expected(step workloads.Step, inFlight bool) string {
	switch {
	case step.IsHold():
		return "release invoke (after the hold)"
	case inFlight:
		return step.Request.Op + " completion"
	}
	return step.Request.Op + " invoke"
}

// matches says whether report m is step's invoke (or, inFlight, its completion).
func matches(m workloads.Message, step workloads.Step, inFlight bool) bool {
	if step.IsHold() || m.F != step.Request.Op {
		return false
	}
	return (m.Step == workloads.StepInvoke) != inFlight
}

// awaitReport waits for the next step report or reply to cycle request id, handling
// events meanwhile (a lost event while holding, nothing in flight, ends the cycle).
// A worker stopped by a signal (client-pause) is waited for however long it stays
// stopped: its hold, or its op, goes on when it runs again. It returns an error when
// the worker crashed, broke the protocol, went quiet for limit while running, or the
// run ended hard.
func (s *session) awaitReport(id int64, limit time.Duration, inFlight bool) (workerMsg, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case m := <-s.w.msgs:
			switch {
			case m.crashed != nil:
				return workerMsg{}, m.crashed
			case m.msg.Event != "":
				s.event(m.msg, inFlight)
				continue
			case *m.msg.ID != id:
				return workerMsg{}, s.violation(m, fmt.Sprintf("a reply with id %d while cycle %d was in flight", *m.msg.ID, id))
			}
			return m, nil
		case <-timer.C:
			if processStopped(s.w.Pid()) {
				timer.Reset(10 * time.Millisecond)
				continue
			}
			return workerMsg{}, fmt.Errorf("cycle %d: nothing reported within %s", id, limit)
		case <-s.hard():
			return workerMsg{}, errors.New("run ended during a cycle")
		}
	}
}
