package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Options say what a client hears of a worker besides its lines.
type Options struct {
	// Trace, when set, is told the worker's life as it goes: "started:" with its
	// command line, ">" with each line sent, "<" with each line read (as the worker
	// wrote it, before it is matched), and "exited:" with how it exited, once it has
	// and its output was read to the end. It is called from several goroutines.
	Trace func(dir, text string)
}

// Worker is one worker as a client drives it: its stdin, the lines of its stdout in
// order (Lines), the request in flight they are matched to (Match), its ids, its
// session and, when Start started it, its process.
type Worker struct {
	opts Options
	cmd  *exec.Cmd
	in   io.WriteCloser
	// lines carries the worker's output to the client; the reader stops delivering
	// once the client abandoned the worker (Kill, Close).
	lines     chan Msg
	abandoned chan struct{}
	abandon   sync.Once
	readDone  chan struct{}
	exited    chan struct{}
	exitErr   error

	mu        sync.Mutex
	nextID    int64
	inFlight  *workloads.Request
	end       *Msg
	sessionID string
	passwd    string
	onSession func(id string)
}

// Command is a worker command for Start: argv in its own process group (Kill ends
// the group), killed if the client dies.
func Command(argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Start starts cmd as a worker: its stdin and stdout become the client's (cmd must
// leave them unset and lead its own process group, as Command's do); its stderr is
// the caller's to set.
func Start(cmd *exec.Cmd, opts Options) (*Worker, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own, not StdoutPipe: Wait must not close it before its last
	// lines are read.
	out, stdout, err := os.Pipe()
	if err != nil {
		in.Close()
		return nil, err
	}
	cmd.Stdout = stdout
	err = cmd.Start()
	stdout.Close()
	if err != nil {
		in.Close()
		out.Close()
		return nil, err
	}
	w := newWorker(in, opts)
	w.cmd = cmd
	w.trace("started:", strings.Join(cmd.Args, " "))
	go w.read(out)
	go w.wait()
	return w, nil
}

// Attach drives a worker whose process is not the client's (a test's fake): requests
// go to in, lines come from out. Its Exited is closed when out ends; Kill closes in.
func Attach(in io.WriteCloser, out io.Reader, opts Options) *Worker {
	w := newWorker(in, opts)
	go func() {
		w.read(out)
		close(w.exited)
	}()
	return w
}

func newWorker(in io.WriteCloser, opts Options) *Worker {
	return &Worker{opts: opts, in: in, lines: make(chan Msg, 64), abandoned: make(chan struct{}),
		readDone: make(chan struct{}), exited: make(chan struct{})}
}

func (w *Worker) trace(dir, text string) {
	if w.opts.Trace != nil {
		w.opts.Trace(dir, text)
	}
}

// wait reaps the process.
func (w *Worker) wait() {
	err := w.cmd.Wait()
	w.exitErr = err
	close(w.exited)
	<-w.readDone
	w.trace("exited:", ExitText(err))
}

// read turns stdout lines into messages, in order, until the output ends.
func (w *Worker) read(out io.Reader) {
	defer close(w.readDone)
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			w.trace("<", strings.TrimRight(string(line), "\n"))
		}
		if err == nil {
			w.deliver(w.parse(line))
			continue
		}
		if err == io.EOF {
			err = ErrOutputEnded
		}
		w.deliver(Msg{Kind: Ended, Err: err})
		return
	}
}

func (w *Worker) deliver(m Msg) {
	select {
	case w.lines <- m:
	case <-w.abandoned:
	}
}

// parse reads one line; a session event is noted at once, before the client reads
// it (the run attributes sessions to processes as soon as they are reported).
func (w *Worker) parse(line []byte) Msg {
	msg, err := workloads.ParseMessage(line)
	if err != nil {
		return Msg{Kind: Malformed, Line: line, Err: fmt.Errorf("malformed line from worker: %v: %q", err, truncate(line, 200))}
	}
	if msg.Event == workloads.EventSession {
		w.mu.Lock()
		w.sessionID, w.passwd = msg.SessionID, msg.Passwd
		f := w.onSession
		w.mu.Unlock()
		if f != nil {
			f(msg.SessionID)
		}
	}
	return Msg{Msg: msg, Line: line}
}

// NextID hands out request ids: 0, 1, 2, ...
func (w *Worker) NextID() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextID
	w.nextID++
	return id
}

// Send writes req (with the id it carries) and makes it the request in flight.
func (w *Worker) Send(req workloads.Request) error {
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.inFlight = &workloads.Request{ID: req.ID, Op: req.Op}
	w.mu.Unlock()
	return w.SendRaw(string(line))
}

// SendRaw writes line as it is (a newline added), with no request in flight made of
// it: for lines no request could be (conformance's bad requests).
func (w *Worker) SendRaw(line string) error {
	w.trace(">", line)
	_, err := io.WriteString(w.in, line+"\n")
	return err
}

// CloseInput closes the worker's stdin (EOF: the worker should end its session and
// exit 0).
func (w *Worker) CloseInput() error { return w.in.Close() }

// Lines is the worker's output as it is read, in order: lines to pass to Match, then
// one of Kind Ended. Await and Next read it too; a client reads it itself to handle
// lines while nothing is in flight.
func (w *Worker) Lines() <-chan Msg { return w.lines }

// Session returns the session the worker last reported (event session).
func (w *Worker) Session() (id, passwd string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessionID, w.passwd
}

// OnSession makes f hear every session id the worker reports from now on (as it is
// read, before Lines delivers it), and returns the one it reported so far ("" if
// none): together they miss none.
func (w *Worker) OnSession(f func(id string)) (current string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onSession = f
	return w.sessionID
}

// Pid is the worker's OS process id (0 for an attached worker).
func (w *Worker) Pid() int {
	if w.cmd == nil {
		return 0
	}
	return w.cmd.Process.Pid
}

// Stopped reports whether the worker's process is stopped by a signal (SIGSTOP: state
// T in /proc/PID/stat).
func (w *Worker) Stopped() bool {
	pid := w.Pid()
	if pid == 0 {
		return false
	}
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

// Exited is closed once the worker's process has exited (an attached worker: once
// its output ended); ExitErr then says how.
func (w *Worker) Exited() <-chan struct{} { return w.exited }

// ExitErr is how the process exited (cmd.Wait's error), once Exited is closed.
func (w *Worker) ExitErr() error { return w.exitErr }

// Kill SIGKILLs the worker's process group and waits for it to exit. The client
// abandons the worker: lines not yet read are dropped. An attached worker only has
// its input closed.
func (w *Worker) Kill() {
	w.abandon.Do(func() { close(w.abandoned) })
	if w.cmd != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = w.in.Close()
	if w.cmd != nil {
		<-w.exited
	}
}

// Close asks the worker to end its session and exit (a close request, then EOF), and
// kills it if it has not within grace.
func (w *Worker) Close(grace time.Duration) {
	if err := w.Send(workloads.Request{ID: w.NextID(), Op: workloads.OpClose}); err == nil {
		_ = w.in.Close()
		select {
		case <-w.exited:
			w.abandon.Do(func() { close(w.abandoned) })
			return
		case <-time.After(grace):
		}
	}
	w.Kill()
}

// ExitText words how a process exited: "status 0", "exit status 1", "signal: killed".
func ExitText(err error) string {
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

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
