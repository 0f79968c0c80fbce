package workloads

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// State is where a worker stands in its lock cycle. The harness publishes it for the
// nemesis (which aims at the holder or at an idle worker) and for the orphan watch.
type State int32

// The states of a worker.
const (
	// Between: not in a lock cycle (starting, or between two cycles).
	Between State = iota
	// Thinking: pausing between two cycles; nothing in flight, nothing held, and the
	// next request is an acquire.
	Thinking
	// Acquiring: the cycle's first acquire is in flight.
	Acquiring
	// Holding: it certainly holds the lock, from its acquire's ok until its outermost
	// release is invoked or it reports the lock lost.
	Holding
	// Releasing: its outermost release is in flight; the hold ends at some moment
	// before the reply.
	Releasing
)

// String names the state.
func (s State) String() string {
	switch s {
	case Thinking:
		return "thinking"
	case Acquiring:
		return "acquiring"
	case Holding:
		return "holding"
	case Releasing:
		return "releasing"
	}
	return "between"
}

// Step is one thing a worker does within a lock cycle: a request, recorded in the
// history as an op, or holding the lock for a while.
type Step struct {
	// Request is what the harness sends to the worker; its Op is empty for a hold.
	Request Request
	// F, Key and Mode are the recorded op's; Value is its invoke's value (a write's).
	F, Key, Mode string
	Value        json.RawMessage
	// Hold is how long a hold step keeps the lock.
	Hold time.Duration
}

// IsHold reports whether the step holds the lock rather than sending a request.
func (s Step) IsHold() bool { return s.Request.Op == "" }

// Cycle is one worker's lock cycle as its workload plans it: acquire (nested, for the
// reentrant workload), the critical section (a hold; the counter workload reads the
// counter before it and writes it plus one after), and release as often as acquired.
// The harness asks Next what to do, does it, and says how it ended with Done (or
// Lost, when the worker reports the lock lost while holding). Whether the worker
// holds the lock is known here and nowhere else (State).
type Cycle struct {
	key     string
	acquire Request
	hold    time.Duration
	noHold  bool
	counter bool
	depth   int

	phase   phase
	held    int
	granted bool
	read    *int64
	state   State
}

type phase int

const (
	phaseAcquire phase = iota
	phaseRead
	phaseHold
	phaseWrite
	phaseRelease
	phaseDone
)

// NewCycle plans a worker's next lock cycle, starting elapsed into the run, from its
// own random source.
func (c Config) NewCycle(rng *rand.Rand, elapsed time.Duration) *Cycle {
	plan := c.Next(rng, elapsed)
	return &Cycle{key: c.Key, acquire: plan.Request, hold: plan.Hold, depth: plan.Depth, counter: c.Kind.HasCounter()}
}

// FitIn cuts the cycle's acquire timeout (to a millisecond at least) and its hold (to
// none at least) to left, what is left of the workload: a cycle begun near the
// workload's end waits and holds no longer than that, so the final phase need not
// wait out a long wait or hold planned past the end (its faults are healed by then).
func (c *Cycle) FitIn(left time.Duration) {
	c.hold = max(0, min(c.hold, left))
	if timeout := time.Duration(c.acquire.TimeoutMS) * time.Millisecond; timeout > left {
		c.acquire.TimeoutMS = max(1, left.Milliseconds())
	}
}

// FinalCycle is the final phase's cycle: one acquire that may wait timeout (for the
// whole lock: a read-write lock's is a write), released at once.
func (c Config) FinalCycle(timeout time.Duration) *Cycle {
	s, _ := c.Kind.spec()
	req := Request{Op: OpAcquire, TimeoutMS: timeout.Milliseconds(), Mode: s.finalMode}
	return &Cycle{key: c.Key, acquire: req, noHold: true, depth: 1}
}

// State says where the worker stands in this cycle.
func (c *Cycle) State() State { return c.state }

// Held is how many levels of the lock the cycle holds now (a re-entrant lock's depth).
func (c *Cycle) Held() int { return c.held }

// Granted says whether an acquire of the cycle was granted.
func (c *Cycle) Granted() bool { return c.granted }

// Mode is the lock mode the cycle asks for ("" unless a read-write lock).
func (c *Cycle) Mode() string { return c.acquire.Mode }

// Next returns what to do now; false once the cycle is over. A request step stays in
// flight until Done.
func (c *Cycle) Next() (Step, bool) {
	for {
		switch c.phase {
		case phaseAcquire:
			if c.held < c.depth {
				if c.held == 0 {
					c.state = Acquiring
				}
				return c.lockStep(histories.FAcquire, c.acquire), true
			}
			c.phase = phaseRead
		case phaseRead:
			if c.counter {
				return Step{Request: Request{Op: OpRead}, F: histories.FRead, Key: CounterKey}, true
			}
			c.phase = phaseHold
		case phaseHold:
			if !c.noHold {
				return Step{Hold: c.hold}, true
			}
			c.phase = phaseWrite
		case phaseWrite:
			if c.read != nil {
				next := *c.read + 1
				return Step{Request: Request{Op: OpWrite, Value: &next}, F: histories.FWrite, Key: CounterKey,
					Value: strconv.AppendInt(nil, next, 10)}, true
			}
			c.phase = phaseRelease
		case phaseRelease:
			if c.held > 0 {
				if c.held == 1 {
					// The certain part of the hold ends when the outermost release is invoked.
					c.state = Releasing
				}
				return c.lockStep(histories.FRelease, Request{Op: OpRelease}), true
			}
			c.end()
		case phaseDone:
			return Step{}, false
		}
	}
}

func (c *Cycle) lockStep(f string, req Request) Step {
	return Step{Request: req, F: f, Key: c.key, Mode: c.acquire.Mode}
}

// Done says how the step Next returned ended: the worker's reply to a request (a
// zero Message once a hold is over).
func (c *Cycle) Done(reply Message) {
	ok := reply.Type == ReplyOK
	switch c.phase {
	case phaseAcquire:
		switch {
		case ok:
			c.held++
			c.state, c.granted = Holding, true
		case c.held == 0:
			c.end()
		default:
			// A nested acquire that failed: carry on with the levels held.
			c.phase = phaseRead
		}
	case phaseRead:
		if ok && reply.Value != nil {
			v := *reply.Value
			c.read = &v
		}
		c.phase = phaseHold
	case phaseHold:
		c.phase = phaseWrite
	case phaseWrite:
		c.phase = phaseRelease
	case phaseRelease:
		c.held--
		if !ok || c.held == 0 {
			// A failed release ends the hold: the lock was already lost.
			c.end()
		}
	}
}

// Lost ends the cycle: the worker reported, while holding, that the lock is gone.
func (c *Cycle) Lost() { c.end() }

func (c *Cycle) end() {
	c.phase, c.held, c.state = phaseDone, 0, Between
}
