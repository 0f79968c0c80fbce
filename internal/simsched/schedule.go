package simsched

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Target says what a step of a kind names.
type Target int

// The targets.
const (
	// NoTarget: the step names nothing (a tick).
	NoTarget Target = iota
	// OnClient: the step names a client, written c<n>.
	OnClient
	// OnInstance: the step names a server instance, written i<n>.
	OnInstance
)

// prefix is the letter a target is written with.
func (t Target) prefix() string {
	switch t {
	case OnClient:
		return "c"
	case OnInstance:
		return "i"
	}
	return ""
}

// Kind is a simulator's kind of step: its name in a schedule's text, and what its
// steps carry.
type Kind interface {
	~string
	// Target says what a step of the kind names.
	Target() Target
	// Timed reports whether a step of the kind carries a duration.
	Timed() bool
	// IsFault reports whether the kind is a fault (off in the liveness phase).
	IsFault() bool
}

// Step is one scheduler step: a kind, the client or instance it names (0 for a
// kind that names none), and a duration for a timed kind.
type Step[K Kind] struct {
	Kind K
	// Target is the client (c<n>) or the instance (i<n>) the step names.
	Target int
	// D is a timed step's duration.
	D time.Duration
}

// String renders the step as a schedule line: "step c1", "tick", "tick 250ms",
// "jump i0 1s".
func (s Step[K]) String() string {
	parts := []string{string(s.Kind)}
	if p := s.Kind.Target().prefix(); p != "" {
		parts = append(parts, p+strconv.Itoa(s.Target))
	}
	if s.Kind.Timed() {
		parts = append(parts, s.D.String())
	}
	return strings.Join(parts, " ")
}

// ParseStep reads a step written by Step.String, of one of kinds.
func ParseStep[K Kind](line string, kinds []K) (Step[K], error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Step[K]{}, fmt.Errorf("empty step")
	}
	st := Step[K]{Kind: K(f[0])}
	if !slices.Contains(kinds, st.Kind) {
		return Step[K]{}, fmt.Errorf("unknown step %q", f[0])
	}
	prefix := st.Kind.Target().prefix()
	want := 1
	if prefix != "" {
		want++
	}
	if st.Kind.Timed() {
		want++
	}
	if len(f) != want {
		return Step[K]{}, fmt.Errorf("step %q: want %d fields, as in %q", line, want, Step[K]{Kind: st.Kind, D: time.Second})
	}
	if prefix != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(f[1], prefix))
		if !strings.HasPrefix(f[1], prefix) || err != nil || n < 0 || f[1] != prefix+strconv.Itoa(n) {
			return Step[K]{}, fmt.Errorf("step %q: bad target %q (want %s0, %s1...)", line, f[1], prefix, prefix)
		}
		st.Target = n
	}
	if st.Kind.Timed() {
		d, err := time.ParseDuration(f[len(f)-1])
		if err != nil || d <= 0 {
			return Step[K]{}, fmt.Errorf("step %q: bad duration %q", line, f[len(f)-1])
		}
		st.D = d
	}
	return st, nil
}

// Schedule is an explicit run of a lock property: how many clients and server
// instances, and the steps. A simulator without instances has Instances 0, and
// its schedules no "instances" line.
type Schedule[K Kind] struct {
	Clients, Instances int
	Steps              []Step[K]
}

// MaxClients bounds a schedule's clients and instances.
const MaxClients = 16

// String renders the schedule in the format ParseSchedule reads: "clients N",
// "instances M" unless Instances is 0, then one step per line.
func (s Schedule[K]) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "clients %d\n", s.Clients)
	if s.Instances > 0 {
		fmt.Fprintf(&b, "instances %d\n", s.Instances)
	}
	for _, st := range s.Steps {
		b.WriteString(st.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseSchedule reads a schedule of steps of kinds: a line "clients N", with
// instances a line "instances M" (1 when missing), then one step per line. Blank
// lines and lines starting with # are ignored.
func ParseSchedule[K Kind](text string, kinds []K, instances bool) (Schedule[K], error) {
	var s Schedule[K]
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		head, rest, _ := strings.Cut(l, " ")
		if count := s.count(head, instances); count != nil {
			v, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || v < 1 || v > MaxClients || *count != 0 || len(s.Steps) > 0 {
				return Schedule[K]{}, fmt.Errorf("line %d: want one %q (1 <= N <= %d) before the steps: %q", n, head+" N", MaxClients, l)
			}
			*count = v
			continue
		}
		st, err := ParseStep(l, kinds)
		if err != nil {
			return Schedule[K]{}, fmt.Errorf("line %d: %w", n, err)
		}
		s.Steps = append(s.Steps, st)
	}
	if err := sc.Err(); err != nil {
		return Schedule[K]{}, err
	}
	if s.Clients == 0 {
		return Schedule[K]{}, fmt.Errorf("no \"clients N\" line")
	}
	if instances && s.Instances == 0 {
		s.Instances = 1
	}
	if err := s.checkTargets(); err != nil {
		return Schedule[K]{}, err
	}
	return s, nil
}

// count is the count a header line names ("clients", and "instances" when the
// schedule has them), or nil.
func (s *Schedule[K]) count(head string, instances bool) *int {
	switch {
	case head == "clients":
		return &s.Clients
	case head == "instances" && instances:
		return &s.Instances
	}
	return nil
}

// checkTargets checks that every step names a client or instance there is.
func (s Schedule[K]) checkTargets() error {
	for i, st := range s.Steps {
		limit := s.Clients
		switch st.Kind.Target() {
		case NoTarget:
			continue
		case OnInstance:
			limit = s.Instances
		}
		if st.Target >= limit {
			return fmt.Errorf("step %d (%s): there are only %d", i+1, st, limit)
		}
	}
	return nil
}
