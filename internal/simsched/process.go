package simsched

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Line is a line of a trace, formatted only when printed.
type Line struct {
	Format string
	Args   []any
}

// String formats the line.
func (l Line) String() string { return fmt.Sprintf(l.Format, l.Args...) }

// The names of a process's ops, and of the steps that start them or time one out.
const (
	OpAcquire = "acquire"
	OpRelease = "release"
	OpTimeout = "timeout"
)

// Op is an operation of a process (an acquire, a release), running in the
// process's worker goroutine.
type Op[H any] struct {
	// F names the op: OpAcquire or OpRelease.
	F string
	// Cancel ends an acquire's context (nil for a release).
	Cancel context.CancelCauseFunc
	// TimedOut: the schedule timed the acquire out.
	TimedOut bool
	// Live: started in the liveness phase.
	Live bool

	// Done, Hold and Err are the op's result: set under the process's lock when
	// it returns, and read once Take returned the op.
	Done bool
	Hold H
	Err  error
}

// Process is one simulated process of a run (a client running its Locker): the
// client it runs as (Slot), its op in flight and its hold as the scheduler sees
// them, its worker goroutine, and what its recipe goroutines hand the scheduler
// (log lines, lost events, the op's end). H is the simulator's Hold.
type Process[H any] struct {
	// ID is the process number; Slot the client it runs as; Name "c<slot>", with
	// "#<id>" for a process that replaced another.
	ID, Slot int
	Name     string

	// The scheduler's side.

	// Op is the op in flight, nil when the process is idle.
	Op *Op[H]
	// Holding: the last acquire was ok, and neither a release nor a lost event
	// came since; Hold is that acquire's.
	Holding bool
	Hold    H
	// LostHold: the process was told it lost its hold, and has not released since.
	LostHold bool
	// Crashed: the process died; another took its slot.
	Crashed bool

	// work runs the process's ops, one at a time, in one goroutine (whose stack,
	// once grown, stays so).
	work chan func()

	// mu guards what recipe goroutines write: logs, lost, and Op's result.
	mu   sync.Mutex
	logs []Line
	lost []string
}

// NewProcess returns process id, running as client slot; replacing says that it
// takes the place of another process of the slot.
func NewProcess[H any](id, slot int, replacing bool) *Process[H] {
	p := &Process[H]{ID: id, Slot: slot, Name: "c" + strconv.Itoa(slot)}
	if replacing {
		p.Name += "#" + strconv.Itoa(id)
	}
	return p
}

// Logf keeps a log line of the recipe's; it never blocks for long.
func (p *Process[H]) Logf(format string, args ...any) {
	p.mu.Lock()
	p.logs = append(p.logs, Line{Format: format, Args: args})
	p.mu.Unlock()
}

// OnLost keeps a lost event of the recipe's; it never blocks for long.
func (p *Process[H]) OnLost(reason string) {
	p.mu.Lock()
	p.lost = append(p.lost, reason)
	p.mu.Unlock()
}

// StartWorker starts the goroutine that runs the process's ops.
func (p *Process[H]) StartWorker() {
	p.work = make(chan func())
	go func() {
		for f := range p.work {
			f()
		}
	}()
}

// StopWorker ends the worker goroutine, if it was started, once its op returned.
func (p *Process[H]) StopWorker() {
	if p.work != nil {
		close(p.work)
	}
}

// Start runs f in the worker as the process's op; the caller settles the bubble.
func (p *Process[H]) Start(op *Op[H], f func() (H, error)) {
	p.Op = op
	p.work <- func() {
		h, err := f()
		p.mu.Lock()
		op.Done, op.Hold, op.Err = true, h, err
		p.mu.Unlock()
	}
}

// Take returns, and forgets, the log lines and lost events kept since the last
// call, and the op in flight if it returned (Op stays set: the caller takes it in).
func (p *Process[H]) Take() (logs []Line, lost []string, done *Op[H]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	logs, lost = p.logs, p.lost
	p.logs, p.lost = nil, nil
	if p.Op != nil && p.Op.Done {
		done = p.Op
	}
	return logs, lost, done
}

// Running reports whether an op is in flight and has not returned.
func (p *Process[H]) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Op != nil && !p.Op.Done
}

// Pending reports whether the op in flight returned, or a lost event came, since
// the last Take.
func (p *Process[H]) Pending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return (p.Op != nil && p.Op.Done) || len(p.lost) > 0
}

// OpStep reports, for a kind of step that starts or ends an op (acquire, release,
// timeout: every simulator has them), whether the process can take it now; ok is
// false for another kind. It may acquire when it is idle and does not hold; release
// when it is idle, and holds or was told it lost its hold; time out an acquire in
// flight, once.
func (p *Process[H]) OpStep(kind string) (can, ok bool) {
	switch kind {
	case OpAcquire:
		return p.Op == nil && !p.Holding, true
	case OpRelease:
		return p.Op == nil && (p.Holding || p.LostHold), true
	case OpTimeout:
		return p.Op != nil && p.Op.F == OpAcquire && !p.Op.TimedOut, true
	}
	return false, false
}

// Procs is a run's processes: Slots holds each client's current process (a step
// names a slot, "c1"), All every process ever started, in order. A process that
// died is replaced by a new one in its slot, as the harness replaces a worker.
type Procs[P any] struct {
	Slots []P
	All   []P
}

// Add makes p the current process of slot, and reports whether it replaced one.
func (t *Procs[P]) Add(slot int, p P) (replaced bool) {
	t.Slots[slot] = p
	t.All = append(t.All, p)
	return len(t.All) > len(t.Slots)
}

// Notes are what a simulator did on its own since the scheduler last took them (a
// handshake, a protocol error), for the run's trace. A simulator keeps them under
// its lock.
type Notes struct{ lines []string }

// Add adds a note.
func (n *Notes) Add(format string, args ...any) {
	n.lines = append(n.lines, fmt.Sprintf(format, args...))
}

// Take returns, and forgets, the notes added since the last call.
func (n *Notes) Take() []string {
	out := n.lines
	n.lines = nil
	return out
}
