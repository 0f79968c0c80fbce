package conformance

import (
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// The rules of protocols v2 and v3 (README, "Worker protocol v2", "Worker protocol
// v3"): a worker that answers an init offering v3 with "protocol":2 or 3 must answer
// clock, run cycle requests on its own and report every step as it happens, with
// times of its own clock that the harness can map onto its own; in v3 one report per
// op, its completion with its invoke's time, and no reply when the last report ends
// the cycle. A v1 worker skips them.

// v2Hold is how long the rules' cycles hold.
const v2Hold = 300 * time.Millisecond

// clockV2Samples is how many clock requests the suite sends a v2 worker; the one
// answered fastest gives the offset.
const clockV2Samples = 3

// clockV2 is a v2 worker's clock as the suite measured it (driver.Clock, on the
// suite's clock: time since start), known to within err.
type clockV2 struct {
	start time.Time
	clock driver.Clock
	err   time.Duration
	// protocol is the version the worker agreed: 2 or 3.
	protocol int
}

// now is the suite's clock.
func (c *clockV2) now() time.Duration { return time.Since(c.start) }

// at maps a worker time onto the suite's clock.
func (c *clockV2) at(mono int64) time.Duration { return time.Duration(c.clock.At(mono)) }

// readyV2 starts worker name and inits it offering the newest protocol; it is
// skipped unless the worker agrees to v2 or later, and its clock is measured
// (clockV2Samples clock requests, the fastest wins; mono_ns may not go back).
func (e *env) readyV2(name string) (*worker, *clockV2, error) {
	w, err := e.start(name)
	if err != nil {
		return nil, nil, err
	}
	req := e.initRequest(w, string(e.cfg.Kind), len(e.workers))
	req.Protocol = workloads.ProtocolVersion
	m, err := w.call(e.ctx, req, e.bounds().InitReplyLimit())
	if err := want(err, m, fmt.Sprintf("%s init offering protocol %d", name, req.Protocol), workloads.ReplyOK); err != nil {
		return nil, nil, err
	}
	switch {
	case m.Protocol < workloads.ProtocolV2:
		return nil, nil, skipped("the worker speaks protocol v1 (its init reply has no \"protocol\":2 or 3)")
	case m.Protocol > req.Protocol:
		return nil, nil, fmt.Errorf("%s init: agreed protocol %d, more than the %d offered", name, m.Protocol, req.Protocol)
	}
	c := &clockV2{start: time.Now(), protocol: m.Protocol}
	var last int64
	clock, err := driver.SyncClock(clockV2Samples, func() int64 { return int64(c.now()) }, func(req workloads.Request) (workloads.Message, error) {
		req.ID = w.NextID()
		m, err := w.call(e.ctx, req, e.bounds().ReplyLimit(0))
		if err == nil && m.MonoNS != nil {
			if *m.MonoNS < last {
				return m, fmt.Errorf("mono_ns %d, before the last one (%d)", *m.MonoNS, last)
			}
			last = *m.MonoNS
		}
		return m, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s %w", name, err)
	}
	c.clock, c.err = clock, time.Duration(clock.Err)
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

// cycle sends a cycle request of depth 1 and collects its reports until it ends,
// within limit: at the reply (v2; v3 after a lost hold) or (v3) at the report that
// ends it, an acquire's fail or info or the release's outcome; a v3 completion is
// taken as its invoke and its completion. Each report's time must lie between the
// send and its arrival (within the clock's error), and go forward.
func (e *env) cycle(w *worker, c *clockV2, req workloads.Request, limit time.Duration) ([]report, error) {
	req.ID, req.Op = w.NextID(), workloads.OpCycle
	sent := c.now()
	if err := w.send(req); err != nil {
		return nil, err
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
		got, err := c.reports(m, c.now())
		if err != nil {
			return reports, fmt.Errorf("%s cycle: %w", w.name, err)
		}
		for _, r := range got {
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
		if c.protocol >= workloads.ProtocolV3 && (m.F == workloads.OpRelease || m.Step != workloads.StepOK) {
			return reports, w.settled(e.ctx, req.ID)
		}
	}
}

// reports turns report m, read at read, into the steps it stands for: itself in v2;
// in v3, where it must be a completion with invoke_ns, its invoke and its completion.
func (c *clockV2) reports(m workloads.Message, read time.Duration) ([]report, error) {
	done := report{m: m, at: c.at(*m.MonoNS), read: read}
	switch {
	case c.protocol < workloads.ProtocolV3:
		return []report{done}, nil
	case m.Step == workloads.StepInvoke:
		return nil, fmt.Errorf("report %q: a v3 worker reports no invokes (the completion carries invoke_ns)", done.step())
	case m.InvokeNS == nil:
		return nil, fmt.Errorf("report %q: a v3 completion needs invoke_ns", done.step())
	}
	inv := m
	inv.Step, inv.MonoNS, inv.InvokeNS, inv.Token, inv.Error = workloads.StepInvoke, m.InvokeNS, nil, nil, ""
	return []report{{m: inv, at: c.at(*m.InvokeNS), read: read}, done}, nil
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
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
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
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
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
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("A cycle: granted at %s, before B's release was sent at %s (± %s)", res.got[1].at, released, c.err)
	}
	return nil
}

// checkCycleLost: A's session expires during its cycle's hold: A sends lost and ends
// the cycle without a release, and B gets the lock.
func checkCycleLost(e *env) error {
	a, c, err := e.readyV2("A")
	if err != nil {
		return err
	}
	ws, err := e.ready("B")
	if err != nil {
		return err
	}
	long := 3*e.cfg.SessionTimeout + 10*time.Second
	plan := workloads.Request{ID: a.NextID(), Op: workloads.OpCycle, TimeoutMS: acquireTimeout.Milliseconds(),
		HoldUS: long.Microseconds(), Mode: e.acquireRequest(a, 0).Mode}
	if err := a.send(plan); err != nil {
		return err
	}
	limit := e.bounds().ReplyLimit(acquireTimeout)
	grant := []string{"acquire invoke", "acquire ok"}
	if c.protocol >= workloads.ProtocolV3 {
		grant = grant[1:]
	}
	for _, step := range grant {
		m, err := a.await(e.ctx, limit)
		if err == nil && (!m.IsReport() || m.F+" "+m.Step != step) {
			err = fmt.Errorf("want the report %q, got %s %s %s", step, m.F, m.Step, m.Type)
		}
		if err == nil && step == "acquire ok" {
			err = e.placed(a, m, "acquire ok")
		}
		if err != nil {
			//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
			return fmt.Errorf("A cycle (hold %s): %w", long, err)
		}
	}
	ending, err := e.end(a, ", during its cycle's hold")
	if err != nil {
		return err
	}
	limit = e.bounds().ReplyLimit(0)
	lost, err := a.waitLost(e.ctx, limit)
	switch {
	case err != nil || !lost && ending.MustReport:
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf(`A held the lock in a cycle and the server %s: no {"event":"lost"} within %s%s`, ending.Did, limit, because(err))
	case !lost:
		if err := e.acquire(ws[0], acquireTimeout, workloads.ReplyOK); err != nil {
			return err
		}
		return unreported(ending, limit)
	}
	m, err := a.await(e.ctx, limit)
	switch {
	case err != nil:
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("A cycle after lost: %w", err)
	case m.IsReport():
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("A cycle after lost: want the cycle's reply (no release after the lock was lost), got the report %q", m.F+" "+m.Step)
	}
	if err := want(nil, m, "A cycle's reply after lost", workloads.ReplyOK); err != nil {
		return err
	}
	return e.acquire(ws[0], acquireTimeout, workloads.ReplyOK)
}
