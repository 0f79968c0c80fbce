package harness

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// worker is one worker OS process: one history process id, one ZooKeeper session (or
// several, if its recipe reconnects), running in its slot's namespace. Its pipes,
// requests and lines are the protocol client's (driver.Worker); the rest is what the
// run keeps of it.
type worker struct {
	*driver.Worker
	// process is the worker's current history process id: a kept worker takes a new
	// one after an op with an unknown outcome (Process, renumber).
	process atomic.Int64
	slot    int
	host    netns.Host
	// protocol is the version the worker speaks (1 unless its init reply said more).
	protocol int
	// clock maps a v2 or v3 worker's step times onto the run's clock.
	clock driver.Clock
	// now is the run's clock (ns since its start), for holdEnd.
	now func() int64
	// holdEnd (v3) is when the hold of a worker in state Holding runs out on the
	// run's clock (0: unknown): from then on it may be releasing unreported.
	holdEnd atomic.Int64
	// killedAt is when a fault killed the worker on the run's clock (0: none): a hold
	// it had ended no later than that (cluster.Killing).
	killedAt atomic.Int64

	// state is where the worker stands in its lock cycle (a workloads.State),
	// published by its session for the nemesis and the orphan watch.
	state atomic.Int32
	// idleSpells counts the worker's thinking spells, so that two observations of an
	// idle worker can tell whether it thought all along.
	idleSpells atomic.Int64
	// place is where its latest grant's lock lives, if the worker said
	// (workloads.LockPlace; nil: it did not).
	place atomic.Pointer[workloads.LockPlace]
	// unknownRelease says which of its releases ended with an unknown outcome, when
	// its latest did (nil: it ended ok or failed, or there was none): a kept worker's
	// session may still have that lock's node (the orphan watch names it).
	unknownRelease atomic.Pointer[string]
}

// noteRelease keeps what the orphan watch needs of a release of the worker's lock
// that completed at t (ns since the run's start) as reply says.
func (w *worker) noteRelease(reply workloads.Message, t int64) {
	if reply.Type != workloads.ReplyInfo {
		w.unknownRelease.Store(nil)
		return
	}
	what := fmt.Sprintf("the release of process %d that ended unknown at %.1fs", w.Process(), float64(t)/1e9)
	if reply.Error != "" {
		what += " (" + reply.Error + ")"
	}
	w.unknownRelease.Store(&what)
}

// startWorker starts argv in host's namespace as history process `process`, stderr
// going to logPath.
func startWorker(host netns.Host, slot, process int, argv []string, logPath string) (*worker, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The process writes to its own copy of the file once started.
	defer logf.Close()
	cmd := host.Command(argv...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("ZLC_PROCESS=%d", process))
	cmd.Stderr = logf
	dw, err := driver.Start(cmd, driver.Options{})
	if err != nil {
		return nil, fmt.Errorf("start worker %d: %w", process, err)
	}
	w := &worker{Worker: dw, slot: slot, host: host, protocol: 1}
	w.process.Store(int64(process))
	return w, nil
}

// send writes a request with a fresh id and returns that id.
func (w *worker) send(req workloads.Request) (int64, error) {
	req.ID = w.NextID()
	return req.ID, w.Send(req)
}

// State says where the worker stands in its lock cycle. A v3 worker reports no
// release invoke: once its hold has run out it counts as releasing, unless it is
// stopped (client-pause), for a stopped worker cannot end its critical section.
func (w *worker) State() workloads.State {
	s := workloads.State(w.state.Load())
	if s == workloads.Holding {
		if end := w.holdEnd.Load(); end != 0 && w.now() >= end && !w.Stopped() {
			return workloads.Releasing
		}
	}
	return s
}

func (w *worker) setState(s workloads.State) { w.state.Store(int32(s)) }

// Process is the worker's current history process id.
func (w *worker) Process() int { return int(w.process.Load()) }
