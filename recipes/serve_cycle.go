package recipes

import (
	"context"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Protocols v2 and v3's cycle request: the worker runs a whole lock cycle on its own
// and reports each step as it happens, with its own monotonic time (docs/protocol.md, "Worker
// protocol v2", "Worker protocol v3").

// holdWatch is where a running cycle and the recipe's lost event agree whether the
// lock was lost while held with nothing in flight: then the lost event is sent and
// the cycle ends without a release; otherwise the lost event is only sent (the op in
// flight decides, as in v1). Both post their lines under mu, so the harness reads
// them in the order that decided.
type holdWatch struct {
	mu       sync.Mutex
	held     int  // levels held by the running cycle (0: none, or no cycle)
	inFlight bool // an acquire or release of the cycle is in flight
	lost     chan struct{}
}

// lose posts a lost event (post) and, if the running cycle holds the lock with
// nothing in flight, ends its hold.
func (h *holdWatch) lose(post func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The event goes out before the cycle can end: its reply must follow the event.
	post()
	if h.held > 0 && !h.inFlight && h.lost != nil {
		close(h.lost)
		h.lost = nil
		h.held = 0
	}
}

// mono is the worker's monotonic clock, in ns since Serve started.
func (s *server) mono() int64 { return time.Since(s.start).Nanoseconds() }

// cycle runs a cycle request: acquire (depth levels; a failed nested acquire ends
// the acquiring), hold, release the levels held (a failed release ends the
// releasing), each step reported; an info outcome or a lost lock ends the cycle at
// once. Then the reply: in v2 always; in v3 only when no report ended the cycle (the
// lock was lost during the hold), for the harness knows a cycle's last report.
func (s *server) cycle(ctx context.Context, req workloads.Request) error {
	h := &s.hold
	h.mu.Lock()
	h.held, h.inFlight, h.lost = 0, false, make(chan struct{})
	lost := h.lost
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.held, h.inFlight, h.lost = 0, false, nil
		h.mu.Unlock()
	}()
	reported, err := s.runCycle(ctx, req, lost)
	if err != nil || (reported && s.protocol >= workloads.ProtocolV3) {
		return err
	}
	// Written here, not by the outbox's goroutine: one hand-over fewer per cycle.
	return s.out.send(workloads.Message{ID: &req.ID, Type: workloads.ReplyOK})
}

// runCycle runs the cycle's steps; reported says its last report ended it (false:
// the lock was lost during the hold, or the worker is stopping).
func (s *server) runCycle(ctx context.Context, req workloads.Request, lost <-chan struct{}) (reported bool, err error) {
	held := 0
	for held < max(req.Depth, 1) {
		at, ok, err := s.invoke(req.ID, workloads.OpAcquire)
		if !ok || err != nil {
			return false, err
		}
		g, err := s.recipe.Acquire(ctx, AcquireRequest{
			Timeout: time.Duration(req.TimeoutMS) * time.Millisecond,
			Mode:    req.Mode,
		})
		typ := s.complete(req.ID, workloads.OpAcquire, at, result{token: g.Token, lock: g.Lock}, err)
		if typ == workloads.ReplyOK {
			held++
			continue
		}
		if typ == workloads.ReplyInfo || held == 0 {
			return true, nil
		}
		break
	}
	timer := time.NewTimer(workloads.HoldFor(req))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-lost:
		return false, nil
	case <-ctx.Done():
		return false, nil
	}
	for ; held > 0; held-- {
		at, ok, err := s.invoke(req.ID, workloads.OpRelease)
		if !ok || err != nil {
			return false, err
		}
		if typ := s.complete(req.ID, workloads.OpRelease, at, result{}, s.recipe.Release(ctx)); typ != workloads.ReplyOK {
			return true, nil
		}
	}
	return true, nil
}

// invoke marks op f of cycle id in flight and returns its invoke time. In v2 it
// reports the invoke and waits until the report is written: a worker that dies after
// sending the request has told the harness; in v3 the time goes out with the
// completion. It returns false, reporting nothing, when the lock was lost while held.
func (s *server) invoke(id int64, f string) (at int64, ok bool, err error) {
	h := &s.hold
	h.mu.Lock()
	if h.lost == nil {
		h.mu.Unlock()
		return 0, false, nil
	}
	defer h.mu.Unlock()
	h.inFlight = true
	now := s.mono()
	if s.protocol >= workloads.ProtocolV3 {
		return now, true, nil
	}
	err = s.out.send(workloads.Message{ID: &id, Step: workloads.StepInvoke, F: f, MonoNS: &now})
	return now, err == nil, err
}

// complete reports how op f of cycle id, invoked at, ended (err as Classify says,
// res with an ok) and returns the outcome. A write error is only logged: the harness
// then sees the worker's output end, which it treats as a crash.
func (s *server) complete(id int64, f string, at int64, res result, err error) string {
	now := s.mono()
	typ, msg := Classify(err)
	m := workloads.Message{ID: &id, Step: typ, F: f, Error: msg, MonoNS: &now}
	if typ == workloads.ReplyOK {
		m.Token, m.Lock = res.token, res.lock
	}
	if s.protocol >= workloads.ProtocolV3 {
		m.InvokeNS = &at
	}
	h := &s.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlight = false
	switch {
	case f == workloads.OpAcquire && typ == workloads.ReplyOK:
		h.held++
	case f == workloads.OpRelease && typ == workloads.ReplyOK:
		h.held--
	case f == workloads.OpRelease:
		h.held = 0
	}
	// Written at once in this goroutine: the harness learns of a grant (the holder
	// the nemesis aims at) without a hand-over to the outbox's goroutine.
	if werr := s.out.send(m); werr != nil {
		s.log.Printf("report %d %s: %v", id, f, werr)
	}
	return typ
}
