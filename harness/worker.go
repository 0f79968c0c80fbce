package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// workerMsg is what a worker's stdout produced: a protocol message, or the reason the
// worker is considered crashed (EOF, a malformed line, exit).
type workerMsg struct {
	msg workloads.Message
	// line is the message as the worker wrote it (for protocol violations).
	line    []byte
	crashed error
}

// worker is one worker OS process: one history process id, one ZooKeeper session (or
// several, if its recipe reconnects), running in its slot's namespace.
type worker struct {
	// process is the worker's current history process id: a kept worker takes a new
	// one after an op with an unknown outcome (Process, renumber).
	process atomic.Int64
	slot    int
	host    netns.Host
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	msgs    chan workerMsg
	exited  chan struct{}
	nextID  int64
	// protocol is the version the worker speaks (1 unless its init reply said more).
	protocol int
	// clock maps a v2 or v3 worker's step times onto the run's clock.
	clock workerClock
	// now is the run's clock (ns since its start), for holdEnd.
	now func() int64
	// holdEnd (v3) is when the hold of a worker in state Holding runs out on the
	// run's clock (0: unknown): from then on it may be releasing unreported.
	holdEnd atomic.Int64

	// state is where the worker stands in its lock cycle (a workloads.State),
	// published by its session for the nemesis and the orphan watch.
	state atomic.Int32
	// idleSpells counts the worker's thinking spells, so that two observations of an
	// idle worker can tell whether it thought all along.
	idleSpells atomic.Int64

	mu        sync.Mutex
	onSession func(id string)
	sessionID string
	passwd    string
}

// startWorker starts argv in host's namespace as history process `process`, stderr
// going to logPath.
func startWorker(host netns.Host, slot, process int, argv []string, logPath string) (*worker, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := host.Command(argv...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("ZLC_PROCESS=%d", process))
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start worker %d: %w", process, err)
	}
	w := &worker{slot: slot, host: host, cmd: cmd, stdin: stdin, protocol: 1,
		msgs: make(chan workerMsg, 16), exited: make(chan struct{})}
	w.process.Store(int64(process))
	go w.read(stdout)
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(w.exited)
	}()
	return w, nil
}

// read turns stdout lines into messages until EOF or a malformed line.
func (w *worker) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			msg, perr := workloads.ParseMessage(line)
			if perr != nil {
				w.msgs <- workerMsg{crashed: fmt.Errorf("malformed line from worker: %v: %q", perr, truncate(line, 200))}
				_, _ = io.Copy(io.Discard, r)
				return
			}
			if msg.Event == workloads.EventSession {
				w.mu.Lock()
				w.sessionID, w.passwd = msg.SessionID, msg.Passwd
				onSession := w.onSession
				w.mu.Unlock()
				if onSession != nil {
					onSession(msg.SessionID)
				}
			}
			w.msgs <- workerMsg{msg: msg, line: line}
			continue
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		if err == io.EOF {
			err = fmt.Errorf("worker closed its output (exited)")
		}
		w.msgs <- workerMsg{crashed: err}
		return
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// send writes a request with a fresh id and returns that id.
func (w *worker) send(req workloads.Request) (int64, error) {
	req.ID = w.nextID
	w.nextID++
	line, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	_, err = w.stdin.Write(append(line, '\n'))
	return req.ID, err
}

// State says where the worker stands in its lock cycle. A v3 worker reports no
// release invoke: once its hold has run out it counts as releasing, unless it is
// stopped (client-pause), for a stopped worker cannot end its critical section.
func (w *worker) State() workloads.State {
	s := workloads.State(w.state.Load())
	if s == workloads.Holding {
		if end := w.holdEnd.Load(); end != 0 && w.now() >= end && !processStopped(w.Pid()) {
			return workloads.Releasing
		}
	}
	return s
}

func (w *worker) setState(s workloads.State) { w.state.Store(int32(s)) }

// Process is the worker's current history process id.
func (w *worker) Process() int { return int(w.process.Load()) }

// Pid is the worker's OS process id.
func (w *worker) Pid() int { return w.cmd.Process.Pid }

// Session returns the worker's last reported session id and password.
func (w *worker) Session() (id, passwd string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessionID, w.passwd
}

// kill SIGKILLs the worker's process group and waits for it to exit.
func (w *worker) kill() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.exited
}

// close asks the worker to end its session and exit, and kills it if it has not
// within grace.
func (w *worker) close(grace time.Duration) {
	if _, err := w.send(workloads.Request{Op: workloads.OpClose}); err == nil {
		_ = w.stdin.Close()
		select {
		case <-w.exited:
			return
		case <-time.After(grace):
		}
	}
	w.kill()
}
