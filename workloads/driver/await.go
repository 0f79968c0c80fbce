package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// ErrStopped is the error of a wait that its Stop ended.
var ErrStopped = errors.New("stopped before the worker answered")

// Wait says how Await waits.
type Wait struct {
	// Limit is how long the worker may stay silent.
	Limit time.Duration
	// Stop, when closed, ends the wait (ErrStopped).
	Stop <-chan struct{}
	// OnEvent, when set, handles the events that come meanwhile.
	OnEvent func(workloads.Message)
	// Pausable: the worker may be stopped by a signal (a client-pause fault), and
	// the limit runs out only while it runs: a stopped worker is waited for however
	// long it stays stopped.
	Pausable bool
}

// Await waits for the next reply or step report to the request in flight and
// returns it. Otherwise it returns the line that ended the wait with its Err (Stray:
// a *Violation; Malformed; Ended), or an error of its own when the worker stayed
// silent for the limit or Stop was closed (ErrStopped).
func (w *Worker) Await(wait Wait) (Msg, error) {
	if m, ok := w.ended(); ok {
		return m, m.Err
	}
	timer := time.NewTimer(wait.Limit)
	defer timer.Stop()
	for {
		select {
		case m := <-w.lines:
			switch m = w.Match(m); m.Kind {
			case Event:
				if wait.OnEvent != nil {
					wait.OnEvent(m.Msg)
				}
				continue
			case Reply, Report:
				return m, nil
			}
			return m, m.Err
		case <-timer.C:
			if wait.Pausable && w.Stopped() {
				timer.Reset(10 * time.Millisecond)
				continue
			}
			return Msg{}, w.timedOut(wait.Limit)
		case <-wait.Stop:
			return Msg{}, ErrStopped
		}
	}
}

// Next returns the next line, matched (Match), waiting up to limit for it (not at
// all when limit <= 0); false when none came. Once the output ended it returns the
// Ended line again.
func (w *Worker) Next(limit time.Duration) (Msg, bool) {
	if m, ok := w.ended(); ok {
		return m, true
	}
	select {
	case m := <-w.lines:
		return w.Match(m), true
	default:
	}
	if limit <= 0 {
		return Msg{}, false
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case m := <-w.lines:
		return w.Match(m), true
	case <-timer.C:
		return Msg{}, false
	}
}

// timedOut is the error of a wait for the request in flight that ran out.
func (w *Worker) timedOut(limit time.Duration) error {
	w.mu.Lock()
	req := w.inFlight
	w.mu.Unlock()
	if req != nil && req.Op == workloads.OpCycle {
		return fmt.Errorf("cycle %d: nothing reported within %s", req.ID, limit)
	}
	return fmt.Errorf("no reply within %s", limit)
}
