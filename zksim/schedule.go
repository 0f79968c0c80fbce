package zksim

import "github.com/zlockcheck/zlockcheck/internal/simsched"

// StepKind is one kind of scheduler step of the lock property.
type StepKind string

// The steps: client steps, then faults.
const (
	// StepAcquire starts an acquire on an idle client.
	StepAcquire StepKind = simsched.OpAcquire
	// StepRelease starts a release on a client that holds (or was told it lost).
	StepRelease StepKind = simsched.OpRelease
	// StepTimeout times out the client's acquire: its context ends.
	StepTimeout StepKind = simsched.OpTimeout
	// StepStep lets the client's next pending request run, reply included.
	StepStep StepKind = "step"
	// StepRun lets the client's pending requests run, one after the other, until it
	// has none (at most maxRun).
	StepRun StepKind = "run"
	// StepDeliver delivers the oldest watch event fired for the client.
	StepDeliver StepKind = "deliver"
	// StepTick moves the clock (retry timers fire); it names no client.
	StepTick StepKind = "tick"
	// StepReconnect reconnects a disconnected client, or gives an expired one a new
	// session.
	StepReconnect StepKind = "reconnect"
	// StepLoseReply applies the client's next pending request and loses its reply
	// (connection loss).
	StepLoseReply StepKind = "lose-reply"
	// StepDrop breaks the client's connection; a pending request is dropped before it
	// is applied.
	StepDrop StepKind = "drop"
	// StepExpire expires the client's session.
	StepExpire StepKind = "expire"
	// StepCrash kills the client's process; its session lives on until it expires.
	StepCrash StepKind = "crash"
)

// StepKinds lists every step kind.
func StepKinds() []StepKind {
	return []StepKind{StepAcquire, StepRelease, StepTimeout, StepStep, StepRun, StepDeliver, StepTick,
		StepReconnect, StepLoseReply, StepDrop, StepExpire, StepCrash}
}

// IsFault reports whether the step kind is a fault (off in the liveness phase).
func (k StepKind) IsFault() bool {
	switch k {
	case StepLoseReply, StepDrop, StepExpire, StepCrash:
		return true
	}
	return false
}

// Target says what a step of the kind names: a client, or nothing for StepTick.
func (k StepKind) Target() simsched.Target {
	if k == StepTick {
		return simsched.NoTarget
	}
	return simsched.OnClient
}

// Timed reports whether a step of the kind carries a duration: none does (a tick
// moves the clock by LockConfig.Tick).
func (k StepKind) Timed() bool { return false }

// Step is one scheduler step: a kind and the client it applies to (Target; 0 for
// StepTick). Its text is "step c1", or "tick".
type Step = simsched.Step[StepKind]

// ParseStep reads a step written by Step.String.
func ParseStep(line string) (Step, error) { return simsched.ParseStep(line, StepKinds()) }

// Schedule is an explicit run of the lock property: how many clients, and the steps
// (the liveness phase follows them, as in every run).
type Schedule struct {
	Clients int
	Steps   []Step
}

// String renders the schedule in the format ParseSchedule reads.
func (s Schedule) String() string {
	return simsched.Schedule[StepKind]{Clients: s.Clients, Steps: s.Steps}.String()
}

// ParseSchedule reads a schedule: a line "clients N", then one step per line. Blank
// lines and lines starting with # are ignored.
func ParseSchedule(text string) (Schedule, error) {
	s, err := simsched.ParseSchedule(text, StepKinds(), false)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{Clients: s.Clients, Steps: s.Steps}, nil
}
