package zksim

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// StepKind is one kind of scheduler step of the lock property.
type StepKind string

// The steps: client steps, then faults.
const (
	// StepAcquire starts an acquire on an idle client.
	StepAcquire StepKind = "acquire"
	// StepRelease starts a release on a client that holds (or was told it lost).
	StepRelease StepKind = "release"
	// StepTimeout times out the client's acquire: its context ends.
	StepTimeout StepKind = "timeout"
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

// Step is one scheduler step: a kind and the client it applies to (ignored by
// StepTick).
type Step struct {
	Kind   StepKind
	Client int
}

// String renders the step as a schedule line, e.g. "step c1" or "tick".
func (s Step) String() string {
	if s.Kind == StepTick {
		return string(s.Kind)
	}
	return fmt.Sprintf("%s c%d", s.Kind, s.Client)
}

// ParseStep reads a step written by Step.String.
func ParseStep(line string) (Step, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return Step{}, fmt.Errorf("empty step")
	}
	kind := StepKind(fields[0])
	if !slices.Contains(StepKinds(), kind) {
		return Step{}, fmt.Errorf("unknown step %q", fields[0])
	}
	if kind == StepTick {
		if len(fields) != 1 {
			return Step{}, fmt.Errorf("tick takes no client: %q", line)
		}
		return Step{Kind: kind}, nil
	}
	if len(fields) != 2 || !strings.HasPrefix(fields[1], "c") {
		return Step{}, fmt.Errorf("want %q followed by a client like c0: %q", kind, line)
	}
	n, err := strconv.Atoi(fields[1][1:])
	if err != nil || n < 0 || fields[1][1:] != strconv.Itoa(n) {
		return Step{}, fmt.Errorf("bad client %q in %q", fields[1], line)
	}
	return Step{Kind: kind, Client: n}, nil
}

// Schedule is an explicit run of the lock property: how many clients, and the steps
// (the liveness phase follows them, as in every run).
type Schedule struct {
	Clients int
	Steps   []Step
}

// maxClients bounds the clients of a schedule.
const maxClients = 16

// String renders the schedule in the format ParseSchedule reads.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "clients %d\n", s.Clients)
	for _, st := range s.Steps {
		b.WriteString(st.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseSchedule reads a schedule: a line "clients N", then one step per line. Blank
// lines and lines starting with # are ignored.
func ParseSchedule(text string) (Schedule, error) {
	var s Schedule
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(l, "clients "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || n < 1 || n > maxClients || s.Clients != 0 || len(s.Steps) > 0 {
				return Schedule{}, fmt.Errorf("line %d: want one \"clients N\" (1 <= N <= %d) before the steps: %q", line, maxClients, l)
			}
			s.Clients = n
			continue
		}
		st, err := ParseStep(l)
		if err != nil {
			return Schedule{}, fmt.Errorf("line %d: %w", line, err)
		}
		s.Steps = append(s.Steps, st)
	}
	if err := sc.Err(); err != nil {
		return Schedule{}, err
	}
	if s.Clients == 0 {
		return Schedule{}, fmt.Errorf("no \"clients N\" line")
	}
	for i, st := range s.Steps {
		if st.Kind != StepTick && st.Client >= s.Clients {
			return Schedule{}, fmt.Errorf("step %d (%s): there are only %d clients", i+1, st, s.Clients)
		}
	}
	return s, nil
}
