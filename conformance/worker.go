package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
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

// worker is one worker process under test, driven the way the harness drives it: one
// request in flight; every line it writes is checked as it arrives.
type worker struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	log  *transcript
	// stderr keeps what the worker logs, for the report.
	stderr *lockedWriter

	mu       sync.Mutex
	inFlight *int64
	// inFlightOp is the op of the request in flight: only a cycle (v2) gets step
	// reports, which come on replies before its reply.
	inFlightOp string
	replies    chan workloads.Message
	lost       chan string
	violations []string
	sessionID  string
	passwd     string
	// violated is closed at the first violation, so a wait for a reply ends at once.
	violated     chan struct{}
	violatedOnce sync.Once
	// nextID is the id of the next request.
	nextID int64

	exited  chan struct{}
	exitErr error
}

// startWorker starts argv with its stdin and stdout piped to the driver.
func startWorker(name string, argv []string, log *transcript) (*worker, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	w := &worker{name: name, cmd: cmd, log: log, stderr: &lockedWriter{w: &bytes.Buffer{}},
		replies: make(chan workloads.Message, 64), lost: make(chan string, 16), exited: make(chan struct{}), violated: make(chan struct{})}
	cmd.Stderr = w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.in = in
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", strings.Join(argv, " "), err)
	}
	log.add(name, "started:", strings.Join(argv, " "))
	go func() {
		w.read(out)
		w.exitErr = cmd.Wait()
		log.add(name, "exited:", exitText(w.exitErr))
		close(w.exited)
	}()
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

func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "status 0"
	case errors.As(err, &ee):
		return ee.ProcessState.String()
	default:
		return err.Error()
	}
}

// read checks each stdout line as it arrives: a reply must carry the id of the
// request in flight, once; anything else is a violation.
func (w *worker) read(out io.Reader) {
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return
		}
		text := strings.TrimRight(string(line), "\n")
		w.log.add(w.name, "<", text)
		msg, perr := workloads.ParseMessage(line)
		w.mu.Lock()
		switch {
		case perr != nil:
			w.violate("line %q is not a protocol line: %v", text, perr)
		case msg.Event == workloads.EventSession:
			w.sessionID, w.passwd = msg.SessionID, msg.Passwd
		case msg.Event == workloads.EventLost:
			select {
			case w.lost <- msg.Error:
			default:
			}
		case w.inFlight == nil:
			w.violate("reply %q with no request in flight", text)
		case msg.IsReport() && (*msg.ID != *w.inFlight || w.inFlightOp != workloads.OpCycle):
			w.violate("step report %q, but the request in flight is %s id %d", text, w.inFlightOp, *w.inFlight)
		case msg.IsReport():
			w.replies <- msg
		case *msg.ID != *w.inFlight:
			w.violate("reply %q carries id %d, but the request in flight is id %d", text, *msg.ID, *w.inFlight)
		default:
			w.inFlight = nil
			w.replies <- msg
		}
		w.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// violate records a protocol violation; w.mu is held.
func (w *worker) violate(format string, args ...any) {
	w.violations = append(w.violations, w.name+": "+fmt.Sprintf(format, args...))
	w.violatedOnce.Do(func() { close(w.violated) })
}

// id hands out the next request id.
func (w *worker) id() int64 {
	id := w.nextID
	w.nextID++
	return id
}

// quietFor waits d and fails if a line other than an event came: a reply to a
// request sent with send and not yet awaited, or a violation the reader recorded (a
// reply with no request in flight, a line that is not a protocol line).
func (w *worker) quietFor(d time.Duration) error {
	select {
	case m := <-w.replies:
		return fmt.Errorf("%s answered %s %q", w.name, m.Type, m.Error)
	case <-w.violated:
		v := w.Violations()
		return fmt.Errorf("protocol violation: %s", v[len(v)-1])
	case <-time.After(d):
		return nil
	}
}

// Violations returns the violations seen so far.
func (w *worker) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}

// sendRaw writes one line as it is.
func (w *worker) sendRaw(line string) error {
	w.log.add(w.name, ">", line)
	_, err := io.WriteString(w.in, line+"\n")
	return err
}

// send writes req and marks it in flight.
func (w *worker) send(req workloads.Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	w.mu.Lock()
	id := req.ID
	w.inFlight, w.inFlightOp = &id, req.Op
	w.mu.Unlock()
	return w.sendRaw(string(b))
}

// await waits up to limit for the reply to the request in flight.
func (w *worker) await(ctx context.Context, limit time.Duration) (workloads.Message, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case m := <-w.replies:
		return m, nil
	case <-w.exited:
		select {
		case m := <-w.replies:
			return m, nil
		default:
		}
		return workloads.Message{}, fmt.Errorf("%s exited (%s) before replying", w.name, exitText(w.exitErr))
	case <-w.violated:
		v := w.Violations()
		return workloads.Message{}, fmt.Errorf("protocol violation: %s", v[len(v)-1])
	case <-timer.C:
		return workloads.Message{}, fmt.Errorf("%s: no reply within %s", w.name, limit)
	case <-ctx.Done():
		return workloads.Message{}, ctx.Err()
	}
}

// settled ends the request in flight without a reply (a v3 cycle its last report
// ended): a reply to it then, or one already come, is a violation.
func (w *worker) settled(ctx context.Context) error {
	w.mu.Lock()
	w.inFlight = nil
	w.mu.Unlock()
	select {
	case m := <-w.replies:
		return fmt.Errorf("%s: %s %q after the report that ended the cycle (v3 sends no reply then)", w.name, m.Type, m.Error)
	case <-w.violated:
		v := w.Violations()
		return fmt.Errorf("protocol violation: %s", v[len(v)-1])
	case <-ctx.Done():
		return ctx.Err()
	default:
		return nil
	}
}

// call sends req and waits up to limit for its reply.
func (w *worker) call(ctx context.Context, req workloads.Request, limit time.Duration) (workloads.Message, error) {
	if err := w.send(req); err != nil {
		return workloads.Message{}, fmt.Errorf("%s: write request: %w", w.name, err)
	}
	return w.await(ctx, limit)
}

// session returns the session the worker last reported.
func (w *worker) session() (id, passwd string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessionID, w.passwd
}

// waitExit waits up to limit for the process to exit and returns its exit error.
func (w *worker) waitExit(limit time.Duration) (error, bool) {
	select {
	case <-w.exited:
		return w.exitErr, true
	case <-time.After(limit):
		return nil, false
	}
}

// kill ends the worker (its whole process group) and waits for it.
func (w *worker) kill() {
	_ = w.in.Close()
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.exited
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
