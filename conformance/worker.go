package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// transcript is the exchange of one rule: every line sent to and received from its
// workers, and their exits, in order, with the time since the rule started.
type transcript struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (t *transcript) add(who, dir, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, fmt.Sprintf("%7.3fs %s %s %s", time.Since(t.start).Seconds(), who, dir, text))
}

func (t *transcript) snapshot() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// worker is one worker process under test, driven through the protocol client the
// harness uses (driver): one request in flight; every line it writes is matched to
// it as it is read, and a line that breaks the protocol breaks the rule.
type worker struct {
	*driver.Worker
	name string
	// stderr keeps what the worker logs, for the report.
	stderr *lockedWriter

	mu         sync.Mutex
	violations []string
	// lost counts the lost events read and not yet waited for (waitLost).
	lost int
	// place is where its last acquire's ok said its lock lives (zero: nowhere).
	place workloads.LockPlace
}

// startWorker starts argv with its stdin and stdout piped to the driver.
func startWorker(name string, argv []string, log *transcript) (*worker, error) {
	w := &worker{name: name, stderr: &lockedWriter{w: &bytes.Buffer{}}}
	cmd := driver.Command(argv...)
	cmd.Stderr = w.stderr
	dw, err := driver.Start(cmd, driver.Options{Trace: func(dir, text string) { log.add(name, dir, text) }})
	if err != nil {
		return nil, fmt.Errorf("start worker %s: %w", strings.Join(argv, " "), err)
	}
	w.Worker = dw
	return w, nil
}

// lockedWriter lets the process's stderr copier and the report share a buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 64<<10 {
		return len(p), nil
	}
	return l.w.Write(p)
}

// violate records line m's breach of the protocol (a Stray or Malformed line) and
// returns it as the rule's problem.
func (w *worker) violate(m driver.Msg) error {
	what := m.Err.Error()
	var v *driver.Violation
	if errors.As(m.Err, &v) {
		what = v.Detail()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, w.name+": "+what)
	return fmt.Errorf("protocol violation: %s", w.violations[len(w.violations)-1])
}

// Violations returns the violations seen so far.
func (w *worker) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}

// event notes an event the worker sent (a session the driver keeps).
func (w *worker) event(m workloads.Message) {
	if m.Event == workloads.EventLost {
		w.mu.Lock()
		w.lost++
		w.mu.Unlock()
	}
}

// failed words what ended a wait for line m: a violation, the worker's exit, the end
// of the rule (ctx), or no answer in time.
func (w *worker) failed(ctx context.Context, m driver.Msg, err error) error {
	switch {
	case err == nil:
		return nil
	case m.Kind == driver.Stray || m.Kind == driver.Malformed:
		return w.violate(m)
	case m.Kind == driver.Ended:
		select {
		case <-w.Exited():
		case <-time.After(time.Second):
		}
		return fmt.Errorf("%s exited (%s) before replying", w.name, driver.ExitText(w.ExitErr()))
	case errors.Is(err, driver.ErrStopped):
		return ctx.Err()
	}
	return fmt.Errorf("%s: %w", w.name, err)
}

// send writes req (with its id) and makes it the request in flight.
func (w *worker) send(req workloads.Request) error {
	if err := w.Send(req); err != nil {
		return fmt.Errorf("%s: write request: %w", w.name, err)
	}
	return nil
}

// await waits up to limit for the reply, or a step report, to the request in flight.
func (w *worker) await(ctx context.Context, limit time.Duration) (workloads.Message, error) {
	m, err := w.Await(driver.Wait{Limit: limit, Stop: ctx.Done(), OnEvent: w.event})
	return m.Msg, w.failed(ctx, m, err)
}

// call sends req and waits up to limit for its reply.
func (w *worker) call(ctx context.Context, req workloads.Request, limit time.Duration) (workloads.Message, error) {
	if err := w.send(req); err != nil {
		return workloads.Message{}, err
	}
	return w.await(ctx, limit)
}

// quietFor waits d and fails if a line other than an event came: a reply to a
// request sent with send and not yet awaited, or a line that breaks the protocol (a
// reply with no request in flight, a line that is not a protocol line).
func (w *worker) quietFor(d time.Duration) error {
	for deadline := time.Now().Add(d); ; {
		m, ok := w.Next(time.Until(deadline))
		switch {
		case !ok || m.Kind == driver.Ended:
			return nil
		case m.Kind == driver.Event:
			w.event(m.Msg)
		case m.Kind == driver.Reply || m.Kind == driver.Report:
			return fmt.Errorf("%s answered %s %q", w.name, m.Msg.Type, m.Msg.Error)
		default:
			return w.violate(m)
		}
	}
}

// waitLost waits up to limit for a lost event (one read meanwhile counts); false
// when none came. A reply or report instead is returned as the error.
func (w *worker) waitLost(ctx context.Context, limit time.Duration) (bool, error) {
	for deadline := time.Now().Add(limit); ; {
		w.mu.Lock()
		lost := w.lost > 0
		w.lost = 0
		w.mu.Unlock()
		if lost {
			return true, nil
		}
		m, ok := w.Next(time.Until(deadline))
		switch {
		case !ok:
			return false, nil
		case m.Kind == driver.Event:
			w.event(m.Msg)
		case m.Kind == driver.Report:
			return false, fmt.Errorf("%s: the report %q before any lost event", w.name, m.Msg.F+" "+m.Msg.Step)
		case m.Kind == driver.Reply:
			return false, fmt.Errorf("%s: %s %q before any lost event", w.name, m.Msg.Type, m.Msg.Error)
		default:
			return false, w.failed(ctx, m, m.Err)
		}
	}
}

// settled ends cycle id, in flight, without a reply (a v3 cycle its last report
// ended): a reply to it then, or one already come, is a violation.
func (w *worker) settled(ctx context.Context, id int64) error {
	w.Settle()
	for {
		m, ok := w.Next(0)
		switch {
		case !ok || m.Kind == driver.Ended:
			return nil
		case m.Kind == driver.Event:
			w.event(m.Msg)
		case m.Kind == driver.Stray && m.Msg.ID != nil && *m.Msg.ID == id && !m.Msg.IsReport():
			return fmt.Errorf("%s: %s %q after the report that ended the cycle (v3 sends no reply then)", w.name, m.Msg.Type, m.Msg.Error)
		default:
			return w.failed(ctx, m, m.Err)
		}
	}
}

// drain reads what the worker wrote and nobody read: a violation among it breaks the
// rule too.
func (w *worker) drain() {
	for {
		m, ok := w.Next(0)
		switch {
		case !ok || m.Kind == driver.Ended:
			return
		case m.Kind == driver.Stray || m.Kind == driver.Malformed:
			w.violate(m)
		}
	}
}

// waitExit waits up to limit for the process to exit and returns its exit error.
func (w *worker) waitExit(limit time.Duration) (error, bool) {
	select {
	case <-w.Exited():
		return w.ExitErr(), true
	case <-time.After(limit):
		return nil, false
	}
}

// stderrTail is the last lines the worker wrote to stderr.
func (w *worker) stderrTail(n int) []string {
	lw := w.stderr
	lw.mu.Lock()
	text := strings.TrimRight(lw.w.String(), "\n")
	lw.mu.Unlock()
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
