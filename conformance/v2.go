package conformance

import (
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// The rules of protocol v2 (README, "Worker protocol v2"): a worker that answers an
// init offering v2 with "protocol":2 must answer clock, run cycle requests on its
// own and report every step as it happens, with times of its own clock that the
// harness can map onto its own. A v1 worker skips them.

// v2Hold is how long the rules' cycles hold.
const v2Hold = 300 * time.Millisecond

// clockV2 is a v2 worker's clock as the suite measured it (see harness.workerClock):
// offset is the worker's time minus the suite's, known to within err.
type clockV2 struct {
	start       time.Time
	offset, err time.Duration
}

// now is the suite's clock.
func (c *clockV2) now() time.Duration { return time.Since(c.start) }

// at maps a worker time onto the suite's clock.
func (c *clockV2) at(mono int64) time.Duration { return time.Duration(mono) - c.offset }

// readyV2 starts worker name and inits it offering v2; it is skipped unless the
// worker agrees, and its clock is measured (three clock requests, the fastest wins).
func (e *env) readyV2(name string) (*worker, *clockV2, error) {
	w, err := e.start(name)
	if err != nil {
		return nil, nil, err
	}
	req := e.initRequest(w, string(e.cfg.Kind), len(e.workers))
	req.Protocol = workloads.ProtocolVersion
	m, err := w.call(e.ctx, req, e.bounds().InitReplyLimit())
	if err := want(err, m, name+" init offering protocol 2", workloads.ReplyOK); err != nil {
		return nil, nil, err
	}
	if m.Protocol < 2 {
		return nil, nil, skipped("the worker speaks protocol v1 (its init reply has no \"protocol\":2)")
	}
	c := &clockV2{start: time.Now(), err: time.Hour}
	var last int64
	for range 3 {
		t0 := c.now()
		m, err := w.call(e.ctx, workloads.Request{ID: w.id(), Op: workloads.OpClock}, e.bounds().ReplyLimit(0))
		t1 := c.now()
		if err := want(err, m, name+" clock", workloads.ReplyOK); err != nil {
			return nil, nil, err
		}
		if m.MonoNS == nil || *m.MonoNS < last {
			return nil, nil, fmt.Errorf("%s clock: want mono_ns, not before the last one (%d), got %v", name, last, m.MonoNS)
		}
		last = *m.MonoNS
		if e := (t1 - t0 + 1) / 2; e < c.err {
			c.offset, c.err = time.Duration(*m.MonoNS)-(t0+t1)/2, e
		}
	}
	return w, c, nil
}

// report is a step report as the suite saw it: the step, when the worker says it
// happened and when the suite read it (both on the suite's clock).
type report struct {
	m        workloads.Message
	at, read time.Duration
}

// step names a report for messages.
func (r report) step() string { return r.m.F + " " + r.m.Step }

// cycle sends a cycle request and collects its reports until the reply, within
// limit. Each report's time must lie between the send and its arrival (within the
// clock's error), and go forward.
func (e *env) cycle(w *worker, c *clockV2, req workloads.Request, limit time.Duration) ([]report, error) {
	req.ID, req.Op = w.id(), workloads.OpCycle
	sent := c.now()
	if err := w.send(req); err != nil {
		return nil, fmt.Errorf("%s: write request: %w", w.name, err)
	}
	var reports []report
	for {
		m, err := w.await(e.ctx, limit)
		if err != nil {
			return reports, fmt.Errorf("%s cycle: %w", w.name, err)
		}
		if !m.IsReport() {
			return reports, want(nil, m, w.name+" cycle's reply", workloads.ReplyOK)
		}
		r := report{m: m, at: c.at(*m.MonoNS), read: c.now()}
		floor := sent
		if len(reports) > 0 {
			floor = reports[len(reports)-1].at
		}
		if r.at < floor-c.err || r.at > r.read+c.err {
			return reports, fmt.Errorf("%s cycle: report %q at %s on the suite's clock, want between %s (the send or the last report) and %s (its arrival), ± %s",
				w.name, r.step(), r.at, floor, r.read, c.err)
		}
		reports = append(reports, r)
	}
}

// wantSteps checks the reports' steps, in order.
func wantSteps(who string, got []report, want ...string) error {
	var steps []string
	for _, r := range got {
		steps = append(steps, r.step())
	}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		return fmt.Errorf("%s: want the reports %q, got %q", who, want, steps)
	}
	return nil
}

var (
	fullCycle = []string{"acquire invoke", "acquire ok", "release invoke", "release ok"}
	timedOut  = []string{"acquire invoke", "acquire fail"}
)

// checkCycle: A (v2) runs a cycle on a free lock, holding v2Hold; one on the lock B
// holds times out after its timeout_ms and releases nothing; one that waits is
// granted only after B's release.
func checkCycle(e *env) error {
	a, c, err := e.readyV2("A")
	if err != nil {
		return err
	}
	ws, err := e.ready("B")
	if err != nil {
		return err
	}
	b := ws[0]
	plan := workloads.Request{TimeoutMS: acquireTimeout.Milliseconds(), HoldUS: v2Hold.Microseconds(), Mode: e.acquireRequest(a, 0).Mode}
	got, err := e.cycle(a, c, plan, e.bounds().ReplyLimit(acquireTimeout)+v2Hold)
	if err == nil {
		err = wantSteps("A cycle on a free lock", got, fullCycle...)
	}
	if err != nil {
		return err
	}
	if held := got[2].at - got[1].at; held < v2Hold-c.err {
		return fmt.Errorf("A cycle: held %s (acquire ok to release invoke), want at least hold_us %s", held, v2Hold)
	}
	if err := e.acquire(b, acquireTimeout, workloads.ReplyOK); err != nil {
		return err
	}
	short := 500 * time.Millisecond
	plan.TimeoutMS = short.Milliseconds()
	got, err = e.cycle(a, c, plan, e.bounds().ReplyLimit(short)+v2Hold)
	if err == nil {
		err = wantSteps("A cycle (timeout_ms 500) while B holds", got, timedOut...)
	}
	if err != nil {
		return err
	}
	if waited := got[1].at - got[0].at; waited < short-c.err {
		return fmt.Errorf("A cycle while B holds: acquire failed after %s, before its timeout %s", waited, short)
	}
	return checkCycleWaits(e, a, b, c, plan)
}

// checkCycleWaits: A's cycle waits while B holds, and is granted after B's release.
func checkCycleWaits(e *env, a, b *worker, c *clockV2, plan workloads.Request) error {
	long := 3*e.cfg.SessionTimeout + 10*time.Second
	plan.TimeoutMS = long.Milliseconds()
	type result struct {
		got []report
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := e.cycle(a, c, plan, e.bounds().ReplyLimit(long)+v2Hold)
		done <- result{got, err}
	}()
	time.Sleep(time.Second)
	released := c.now()
	if err := e.release(b); err != nil {
		return err
	}
	res := <-done
	if res.err == nil {
		res.err = wantSteps("A cycle waiting for B", res.got, fullCycle...)
	}
	if res.err != nil {
		return res.err
	}
	if res.got[1].at < released-c.err {
		return fmt.Errorf("A cycle: granted at %s, before B's release was sent at %s (± %s)", res.got[1].at, released, c.err)
	}
	return nil
}

// checkCycleLost: A's session expires during its cycle's hold: A sends lost and ends
// the cycle without a release, and B gets the lock.
func checkCycleLost(e *env) error {
	a, _, err := e.readyV2("A")
	if err != nil {
		return err
	}
	ws, err := e.ready("B")
	if err != nil {
		return err
	}
	id, passwd := a.session()
	if id == "" || passwd == "" {
		return skipped(`A sent no {"event":"session"} with session_id and passwd, so its session cannot be expired`)
	}
	long := 3*e.cfg.SessionTimeout + 10*time.Second
	plan := workloads.Request{ID: a.id(), Op: workloads.OpCycle, TimeoutMS: acquireTimeout.Milliseconds(),
		HoldUS: long.Microseconds(), Mode: e.acquireRequest(a, 0).Mode}
	if err := a.send(plan); err != nil {
		return err
	}
	limit := e.bounds().ReplyLimit(acquireTimeout)
	for _, step := range []string{"acquire invoke", "acquire ok"} {
		m, err := a.await(e.ctx, limit)
		if err == nil && (!m.IsReport() || m.F+" "+m.Step != step) {
			err = fmt.Errorf("want the report %q, got %s %s %s", step, m.F, m.Step, m.Type)
		}
		if err != nil {
			return fmt.Errorf("A cycle (hold %s): %w", long, err)
		}
	}
	e.log.add("suite", "--", "expire A's session "+id+" during its cycle's hold")
	if err := e.cfg.Server.Expire(e.ctx, id, passwd); err != nil {
		return fmt.Errorf("expire A's session %s: %w", id, err)
	}
	limit = e.bounds().ReplyLimit(0)
	select {
	case <-a.lost:
	case <-time.After(limit):
		return fmt.Errorf(`A held the lock in a cycle and its session %s expired: no {"event":"lost"} within %s`, id, limit)
	}
	m, err := a.await(e.ctx, limit)
	switch {
	case err != nil:
		return fmt.Errorf("A cycle after lost: %w", err)
	case m.IsReport():
		return fmt.Errorf("A cycle after lost: want the cycle's reply (no release after the lock was lost), got the report %q", m.F+" "+m.Step)
	}
	if err := want(nil, m, "A cycle's reply after lost", workloads.ReplyOK); err != nil {
		return err
	}
	return e.acquire(ws[0], acquireTimeout, workloads.ReplyOK)
}
