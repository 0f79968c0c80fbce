package harness

import (
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"

	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// Protocols v2 and v3: the worker runs a whole lock cycle on its own
// (workloads.OpCycle) and reports each step as it happens, stamped with its own
// monotonic clock; the harness maps those times onto the run's clock (driver.Clock)
// and records the ops with them. No pipe hop or harness wake-up sits between a grant
// and the hold, or between the hold's end and the release. v2 reports each invoke
// and each completion and replies at the end; v3 reports each op once, its
// completion with its invoke's time, and replies only when no report ended the cycle
// (the lock was lost during the hold). The harness walks the same workloads.Cycle as
// in v1, step by step as the reports come, so every protocol records the same ops.

// clockSamples is how many clock requests the harness sends a v2 or v3 worker after init;
// the one answered fastest gives the offset.
const clockSamples = 5

// syncClock measures a v2 or v3 worker's clock offset (clockSamples round trips). An
// invoke the worker reports is recorded at its mapped time - err, a completion at +
// err: each recorded interval contains the true one, as in v1 (where the harness
// stamps the invoke before sending, the completion after reading).
func (s *session) syncClock() error {
	clock, err := driver.SyncClock(clockSamples, s.env.rec.now, func(req workloads.Request) (workloads.Message, error) {
		if _, err := s.w.send(req); err != nil {
			return workloads.Message{}, err
		}
		return s.await(s.env.bounds.ReplyLimit(0))
	})
	if err != nil {
		return err
	}
	s.w.clock = clock
	s.env.logf("worker %d: protocol v%d, its clock known to within %s", s.w.Process(), s.w.protocol, time.Duration(clock.Err))
	return nil
}

// runPlanned sends the cycle's plan (its OpCycle request) and follows the worker's
// reports through the cycle: each report must be the step the cycle expects next. A
// lost event while holding with nothing in flight ends the cycle (the worker then
// releases nothing); in v2 the worker's reply to the plan ends it on the worker's
// side, in v3 the cycle's last report does (a reply only after a lost hold).
func (s *session) runPlanned(plan workloads.Request, limit func(workloads.Step) time.Duration) {
	p := &planned{s: s, v3: s.w.protocol >= workloads.ProtocolV3, since: s.env.rec.now()}
	id, err := s.w.send(plan)
	if err != nil {
		s.crash("", fmt.Errorf("write to worker: %w", err))
		return
	}
	// The acquire is under way from here: the stall watch counts it as tried.
	s.env.rec.attempted(p.since)
	p.id = id
	for !s.dead && p.next(limit) {
	}
	// Over: a v3 cycle its last report ended gets no reply (one now is a violation).
	s.w.Settle()
}

// planned is the harness's side of one planned cycle.
type planned struct {
	s  *session
	id int64
	v3 bool
	// inFlight (v2): the op the cycle expects next was reported invoked.
	inFlight bool
	// since (v3) is the earliest time the op the cycle expects next may have been
	// invoked: the plan's send, then the last completion, then the hold's end.
	since int64
	// lost (v3) is a lost event that came while holding: it ended the hold if the
	// reply comes next, and is void if a report does (its op was in flight).
	lost *lostEvent
}

// lostEvent is a lost event held back until the next line says what it ended.
type lostEvent struct {
	at  int64
	msg workloads.Message
}

// next takes the cycle one line further; false once it is over (or the worker is).
func (p *planned) next(limit func(workloads.Step) time.Duration) bool {
	s, c := p.s, p.s.cycle
	step, more := c.Next()
	s.publish()
	if !more && p.v3 {
		return false
	}
	wait := limit(step)
	if step.IsHold() {
		wait += step.Hold
	}
	m, err := s.awaitReport(wait, p.event)
	if err != nil {
		p.crash(step, err)
		return false
	}
	// An event may have ended the cycle meanwhile (lost while holding).
	step, more = c.Next()
	if m.Kind == driver.Reply {
		p.replied(m, step, more)
		return false
	}
	if p.lost != nil && p.lostNested(m.Msg, step, more) {
		// A nested acquire was in flight: whatever it did, the session is gone, and
		// every level held with it, so it holds nothing (a fail), and the lost event
		// ends the outer levels, which the worker never releases: its cycle ends at
		// this report.
		failed := m.Msg
		failed.Step, failed.Error = workloads.StepFail, m.Msg.Error+" (the session was lost: no level is held)"
		p.record(failed, step)
		s.lose(p.lost.msg, p.lost.at)
		p.lost = nil
		return true
	}
	if p.lost != nil {
		s.env.logf("worker %d: lost event while an op was in flight (its outcome decides): %s", s.w.Process(), p.lost.msg.Error)
		p.lost = nil
	}
	if more && step.IsHold() && p.endsHold(m.Msg) {
		c.Done(workloads.Message{})
		step, more = c.Next()
	}
	if !more || !p.matches(m.Msg, step) {
		want := "reply (the cycle is over)"
		if more {
			want = p.expected(step)
		}
		p.crash(step, s.violation(&driver.Violation{What: fmt.Sprintf("cycle %d: want its %s", p.id, want), Line: m.Line}))
		return false
	}
	p.record(m.Msg, step)
	return true
}

// lostNested says whether report m, after a lost event held back, is the failed or
// unknown outcome of a nested acquire (a re-entrant lock's inner level, asked for
// while the cycle holds an outer one): the lost event then ended the outer levels
// too, which the worker never releases.
func (p *planned) lostNested(m workloads.Message, step workloads.Step, more bool) bool {
	return more && !step.IsHold() && p.s.cycle.Held() > 0 && m.F == workloads.OpAcquire &&
		m.Step != workloads.ReplyOK && p.matches(m, step)
}

// endsHold says whether report m is the first one after the hold.
func (p *planned) endsHold(m workloads.Message) bool {
	if p.v3 {
		return m.F == workloads.OpRelease
	}
	return m.Step == workloads.StepInvoke
}

// record records what report m says of step: v2 an invoke or a completion, v3 both.
func (p *planned) record(m workloads.Message, step workloads.Step) {
	s, clock := p.s, p.s.w.clock
	if !p.inFlight {
		at := *m.MonoNS
		if p.v3 {
			at = *m.InvokeNS
		}
		s.invoked(step, clock.InvokeAt(at))
		if !p.v3 {
			p.inFlight = true
			return
		}
	}
	reply := workloads.Message{Type: m.Step, Error: m.Error, Token: m.Token, Lock: m.Lock}
	done := clock.CompleteAt(*m.MonoNS)
	if m.Step == workloads.ReplyOK && (step.F == histories.FRelease && s.cycle.Held() > 1 || step.F == histories.FAcquire && s.cycle.Held() > 0) {
		// A re-entrant lock's inner level, taken or given back while the process holds
		// the lock, changes nothing another process can see: it completes at its
		// earliest bound, so that the outer release's invoke, stamped right after,
		// is not pushed past its true time by the recorder's per-process order (which
		// would fake an overlap with the grant that release makes).
		done = clock.InvokeAt(*m.MonoNS)
	}
	s.completed(step, reply, done)
	p.inFlight, p.since = false, done
	if !p.v3 {
		return
	}
	if next, more := s.cycle.Next(); more && next.IsHold() {
		// The worker starts its hold after this report: no release before its end.
		p.since = clock.InvokeAt(*m.MonoNS + next.Hold.Nanoseconds())
		s.w.holdEnd.Store(p.since)
	}
}

// replied handles the worker's reply to the plan: the cycle must be over, or (v3)
// a lost event held back ended it.
func (p *planned) replied(m driver.Msg, step workloads.Step, more bool) {
	s := p.s
	if p.lost != nil && more {
		s.lose(p.lost.msg, p.lost.at)
		step, more = s.cycle.Next()
	}
	if more {
		p.crash(step, s.violation(&driver.Violation{What: fmt.Sprintf("cycle %d: the reply came before its %s", p.id, p.expected(step)), Line: m.Line}))
	}
}

// event handles an event during the cycle. A lost event while the cycle holds a
// level with nothing in flight ends it (the worker releases nothing more); v3 holds
// it back, for only the next line tells whether an op was in flight.
func (p *planned) event(m workloads.Message) {
	s := p.s
	if m.Event != workloads.EventLost || p.inFlight || !p.holds() {
		s.event(m, p.inFlight)
		return
	}
	if p.v3 {
		p.lost = &lostEvent{at: s.env.rec.now(), msg: m}
		return
	}
	s.lose(m, s.env.rec.now())
}

// holds says whether the cycle holds a level: holding, or between the releases of
// a nested cycle (releasing, the outermost release not yet begun).
func (p *planned) holds() bool {
	if p.s.cycle == nil {
		return false
	}
	st := p.s.cycle.State()
	return st == workloads.Holding || st == workloads.Releasing
}

// crash ends the worker during the cycle. In v3 an op the worker has not reported
// may be under way: it is recorded as invoked at the earliest moment it could have
// been (wider than the truth, never narrower), and completes as info.
func (p *planned) crash(step workloads.Step, why error) {
	s := p.s
	switch {
	case p.inFlight:
		s.crash(step.F, why)
	case p.v3 && !step.IsHold() && step.F != "":
		s.invoked(step, p.since)
		s.crash(step.F, why)
	default:
		s.crash("", why)
	}
}

// expected words what a cycle expects next, for a violation's message.
func (p *planned) expected(step workloads.Step) string {
	switch {
	case step.IsHold():
		if p.v3 {
			return "release report (after the hold)"
		}
		return "release invoke (after the hold)"
	case p.v3:
		return step.Request.Op + " report"
	case p.inFlight:
		return step.Request.Op + " completion"
	}
	return step.Request.Op + " invoke"
}

// matches says whether report m is what the cycle expects: in v2 step's invoke (or,
// in flight, its completion), in v3 step's completion with its invoke time.
func (p *planned) matches(m workloads.Message, step workloads.Step) bool {
	if step.IsHold() || m.F != step.Request.Op {
		return false
	}
	if p.v3 {
		return m.Step != workloads.StepInvoke && m.InvokeNS != nil
	}
	return m.InvokeNS == nil && (m.Step == workloads.StepInvoke) != p.inFlight
}

// awaitReport waits for the next step report or reply to the cycle in flight, handing
// events to event meanwhile. A worker stopped by a signal (client-pause) is waited
// for however long it stays stopped: its hold, or its op, goes on when it runs again.
// It returns an error when the worker crashed, broke the protocol, went quiet for
// limit while running, or the run ended hard.
func (s *session) awaitReport(limit time.Duration, event func(workloads.Message)) (driver.Msg, error) {
	m, err := s.w.Await(driver.Wait{Limit: limit, Stop: s.env.hard, OnEvent: event, Pausable: true})
	return m, s.failed(err, "run ended during a cycle")
}
