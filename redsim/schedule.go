package redsim

import "github.com/zlockcheck/zlockcheck/internal/simsched"

// StepKind is one kind of scheduler step of the lock property.
type StepKind string

// The steps: client steps, the clock, then faults. (zksim has its own kinds for
// ZooKeeper; the two share simsched's Step and text format.)
const (
	// StepAcquire starts an acquire on an idle client.
	StepAcquire StepKind = simsched.OpAcquire
	// StepRelease starts a release on a client that holds (or was told it lost).
	StepRelease StepKind = simsched.OpRelease
	// StepTimeout ends the context of the client's acquire.
	StepTimeout StepKind = simsched.OpTimeout
	// StepStep serves the client's next request; its reply comes back.
	StepStep StepKind = "step"
	// StepRun serves the client's requests until it has none (at most maxRun).
	StepRun StepKind = "run"
	// StepTick moves the clock by its duration: timers fire, keys expire, held
	// replies arrive.
	StepTick StepKind = "tick"
	// StepLoseReply applies the client's next request, then breaks its connection.
	StepLoseReply StepKind = "lose-reply"
	// StepDrop breaks the connection of the client's next request before it is
	// applied.
	StepDrop StepKind = "drop"
	// StepDelay applies the client's next request and holds its reply past the
	// next tick.
	StepDelay StepKind = "delay"
	// StepCrash kills the client's process; a new one takes its place.
	StepCrash StepKind = "crash"
	// StepJump moves an instance's clock forward by its duration.
	StepJump StepKind = "jump"
	// StepRestart restarts an instance without persistence: its keys are lost.
	StepRestart StepKind = "restart"
)

// StepKinds lists every step kind.
func StepKinds() []StepKind {
	return []StepKind{StepAcquire, StepRelease, StepTimeout, StepStep, StepRun, StepTick,
		StepLoseReply, StepDrop, StepDelay, StepCrash, StepJump, StepRestart}
}

// IsFault reports whether the kind is a fault (off in the liveness phase).
func (k StepKind) IsFault() bool {
	switch k {
	case StepLoseReply, StepDrop, StepDelay, StepCrash, StepJump, StepRestart:
		return true
	}
	return false
}

// Target says what a step of the kind names: an instance for a jump or a restart,
// nothing for a tick, else a client.
func (k StepKind) Target() simsched.Target {
	switch k {
	case StepTick:
		return simsched.NoTarget
	case StepJump, StepRestart:
		return simsched.OnInstance
	}
	return simsched.OnClient
}

// Timed reports whether the kind carries a duration: a tick or a jump.
func (k StepKind) Timed() bool { return k == StepTick || k == StepJump }

// Step is one scheduler step: a kind, the client (c<n>) or, for a jump or a
// restart, the instance (i<n>) it applies to (Target; none for a tick), and a
// duration for a tick or a jump (D). Its text is "step c1", "tick 250ms",
// "jump i0 1s", "restart i2".
type Step = simsched.Step[StepKind]

// ParseStep reads a step written by Step.String.
func ParseStep(line string) (Step, error) { return simsched.ParseStep(line, StepKinds()) }

// Schedule is an explicit run of the lock property: how many clients and
// instances, and the steps (the liveness phase follows them, as in every run).
type Schedule struct {
	Clients, Instances int
	Steps              []Step
}

// String renders the schedule in the format ParseSchedule reads.
func (s Schedule) String() string { return s.generic().String() }

func (s Schedule) generic() simsched.Schedule[StepKind] {
	return simsched.Schedule[StepKind]{Clients: s.Clients, Instances: s.Instances, Steps: s.Steps}
}

// ParseSchedule reads a schedule: "clients N", "instances M" (1 when missing),
// then one step per line. Blank lines and lines starting with # are ignored.
func ParseSchedule(text string) (Schedule, error) {
	s, err := simsched.ParseSchedule(text, StepKinds(), true)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{Clients: s.Clients, Instances: s.Instances, Steps: s.Steps}, nil
}
