package driver

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Kind is what a line of the worker's is.
type Kind int

// The kinds of lines. Lines delivers Malformed and Ended lines as they are, and every
// other line unmatched (kind 0) until Match says what it is to the request in flight.
const (
	// Reply is the reply to the request in flight, which is then no longer in flight.
	Reply Kind = iota + 1
	// Report is a step report (v2, v3) of the cycle in flight.
	Report
	// Event is an event (lost, session): it may come at any time.
	Event
	// Stray is a reply or a report that breaks the protocol (another request's id,
	// nothing in flight, a report to a request that is not a cycle): Err is a
	// *Violation.
	Stray
	// Malformed is a line that is not a protocol line: Err says why.
	Malformed
	// Ended is the end of the worker's output (it exited, or closed its stdout): Err
	// says how, ErrOutputEnded at EOF. It is the last line.
	Ended
)

// ErrOutputEnded is how an Ended line's output ended at EOF.
var ErrOutputEnded = errors.New("worker closed its output (exited)")

// Msg is one line of the worker's as the client reads it.
type Msg struct {
	Kind Kind
	// Msg is the protocol message of the line (not for Malformed and Ended).
	Msg workloads.Message
	// Line is the line as the worker wrote it.
	Line []byte
	// Err is why a Stray, Malformed or Ended line ends the worker's use.
	Err error
}

// Violation is a line that breaks the protocol: what is wrong with it, and the line.
// A client may find more wrong with a line than Match does (a report out of its
// cycle's order) and say so with a Violation of its own.
type Violation struct {
	What string
	Line []byte
}

// Error is "protocol violation: " and Detail.
func (v *Violation) Error() string { return "protocol violation: " + v.Detail() }

// Detail says what is wrong and shows the line (its first 200 bytes).
func (v *Violation) Detail() string {
	return v.What + ": " + truncate(bytes.TrimSpace(v.Line), 200)
}

// Match says what line m (from Lines) is to the request in flight, and ends the
// request when m is its reply. Lines are matched in the order they came: a reply must
// carry the id of the request in flight and come once; only a cycle gets step reports.
func (w *Worker) Match(m Msg) Msg {
	if m.Kind != 0 {
		if m.Kind == Ended {
			w.mu.Lock()
			w.end = &m
			w.mu.Unlock()
		}
		return m
	}
	if m.Msg.Event != "" {
		m.Kind = Event
		return m
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	id, req := *m.Msg.ID, w.inFlight
	switch {
	case req == nil:
		return stray(m, fmt.Sprintf("a reply with id %d while no request was in flight", id))
	case id != req.ID:
		what := "request"
		if req.Op == workloads.OpCycle {
			what = "cycle"
		}
		return stray(m, fmt.Sprintf("a reply with id %d while %s %d was in flight", id, what, req.ID))
	case m.Msg.IsReport() && req.Op != workloads.OpCycle:
		return stray(m, fmt.Sprintf("a step report to request %d, which is not a cycle", id))
	case m.Msg.IsReport():
		m.Kind = Report
	default:
		m.Kind, w.inFlight = Reply, nil
	}
	return m
}

func stray(m Msg, what string) Msg {
	m.Kind, m.Err = Stray, &Violation{What: what, Line: m.Line}
	return m
}

// Settle ends the request in flight without a reply (a v3 cycle its last report
// ended): a reply to it from now on is Stray.
func (w *Worker) Settle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight = nil
}

// ended returns the Ended line once Match has seen it.
func (w *Worker) ended() (Msg, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.end == nil {
		return Msg{}, false
	}
	return *w.end, true
}
