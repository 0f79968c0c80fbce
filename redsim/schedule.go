package redsim

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// StepKind is one kind of scheduler step of the lock property.
type StepKind string

// The steps: client steps, the clock, then faults. (zksim has its own kinds for
// ZooKeeper; the two share the textual format, not the code: zksim's Step has no
// duration and no instance.)
const (
	// StepAcquire starts an acquire on an idle client.
	StepAcquire StepKind = "acquire"
	// StepRelease starts a release on a client that holds (or was told it lost).
	StepRelease StepKind = "release"
	// StepTimeout ends the context of the client's acquire.
	StepTimeout StepKind = "timeout"
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

// onInstance reports whether the kind names an instance rather than a client.
func (k StepKind) onInstance() bool { return k == StepJump || k == StepRestart }

// timed reports whether the kind carries a duration.
func (k StepKind) timed() bool { return k == StepTick || k == StepJump }

// Step is one scheduler step: a kind, the client or instance it applies to (none
// for a tick), and a duration for a tick or a jump.
type Step struct {
	Kind StepKind
	// Target is the client (c<n>) or, for a jump or a restart, the instance (i<n>).
	Target int
	D      time.Duration
}

// String renders the step as a schedule line: "step c1", "tick 250ms",
// "jump i0 1s", "restart i2".
func (s Step) String() string {
	var parts []string
	parts = append(parts, string(s.Kind))
	switch {
	case s.Kind == StepTick:
	case s.Kind.onInstance():
		parts = append(parts, "i"+strconv.Itoa(s.Target))
	default:
		parts = append(parts, "c"+strconv.Itoa(s.Target))
	}
	if s.Kind.timed() {
		parts = append(parts, s.D.String())
	}
	return strings.Join(parts, " ")
}

// ParseStep reads a step written by Step.String.
func ParseStep(line string) (Step, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Step{}, fmt.Errorf("empty step")
	}
	st := Step{Kind: StepKind(f[0])}
	if !slices.Contains(StepKinds(), st.Kind) {
		return Step{}, fmt.Errorf("unknown step %q", f[0])
	}
	want := 1
	if st.Kind != StepTick {
		want++
	}
	if st.Kind.timed() {
		want++
	}
	if len(f) != want {
		return Step{}, fmt.Errorf("step %q: want %d fields, as in %q", line, want, Step{Kind: st.Kind, D: time.Second})
	}
	if st.Kind != StepTick {
		prefix := "c"
		if st.Kind.onInstance() {
			prefix = "i"
		}
		n, err := strconv.Atoi(strings.TrimPrefix(f[1], prefix))
		if !strings.HasPrefix(f[1], prefix) || err != nil || n < 0 || f[1] != prefix+strconv.Itoa(n) {
			return Step{}, fmt.Errorf("step %q: bad target %q (want %s0, %s1...)", line, f[1], prefix, prefix)
		}
		st.Target = n
	}
	if st.Kind.timed() {
		d, err := time.ParseDuration(f[len(f)-1])
		if err != nil || d <= 0 {
			return Step{}, fmt.Errorf("step %q: bad duration %q", line, f[len(f)-1])
		}
		st.D = d
	}
	return st, nil
}

// Schedule is an explicit run of the lock property: how many clients and
// instances, and the steps (the liveness phase follows them, as in every run).
type Schedule struct {
	Clients, Instances int
	Steps              []Step
}

// maxClients bounds a schedule's clients and instances.
const maxClients = 16

// String renders the schedule in the format ParseSchedule reads.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "clients %d\ninstances %d\n", s.Clients, s.Instances)
	for _, st := range s.Steps {
		b.WriteString(st.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseSchedule reads a schedule: "clients N", "instances M" (1 when missing),
// then one step per line. Blank lines and lines starting with # are ignored.
func ParseSchedule(text string) (Schedule, error) {
	s := Schedule{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if head, rest, ok := strings.Cut(l, " "); ok && (head == "clients" || head == "instances") {
			v, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || v < 1 || v > maxClients || len(s.Steps) > 0 {
				return Schedule{}, fmt.Errorf("line %d: want %q (1 <= N <= %d) before the steps: %q", n, head+" N", maxClients, l)
			}
			if head == "clients" {
				s.Clients = v
			} else {
				s.Instances = v
			}
			continue
		}
		st, err := ParseStep(l)
		if err != nil {
			return Schedule{}, fmt.Errorf("line %d: %w", n, err)
		}
		s.Steps = append(s.Steps, st)
	}
	if err := sc.Err(); err != nil {
		return Schedule{}, err
	}
	if s.Clients == 0 {
		return Schedule{}, fmt.Errorf("no \"clients N\" line")
	}
	if s.Instances == 0 {
		s.Instances = 1
	}
	for i, st := range s.Steps {
		limit := s.Clients
		if st.Kind.onInstance() {
			limit = s.Instances
		}
		if st.Kind != StepTick && st.Target >= limit {
			return Schedule{}, fmt.Errorf("step %d (%s): there are only %d", i+1, st, limit)
		}
	}
	return s, nil
}
