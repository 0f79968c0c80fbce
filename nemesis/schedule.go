package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// DefaultInterval is the mean quiet time between two faults.
const DefaultInterval = 10 * time.Second

// Schedule says which faults to inflict and how often.
//
// One fault is on at a time. Before each, the nemesis waits a random quiet time,
// uniform in [Interval/2, 3·Interval/2). It then picks a class uniformly among
// Classes and the fault's parameters (target, shape, loss), and holds the fault for a
// class-dependent time (each class's entry in the catalogue, classes.go):
//
//   - kill, pause, partition, packet, client-server-partition: uniform in
//     [Interval/2, 3·Interval/2);
//   - client-partition, client-pause: uniform in [1.75, 2.25)·SessionTimeout, so the
//     servers expire the worker's session while it is cut off or frozen;
//   - reply-loss: ReplyLossFraction·SessionTimeout (see there), or ClientHold;
//   - connection-reset: ResetFraction·SessionTimeout (see there), or ClientHold;
//   - session-expire, client-kill: nothing to hold (they are over when applied).
//
// Every choice comes from a random number generator seeded with Seed, so the same
// seed gives the same sequence of classes, parameters and times; each fault picks its
// targets with a generator of its own, also derived from Seed, so the targets differ
// only where the cluster's state (leader, holder, live workers) differs.
type Schedule struct {
	// Classes are the kinds of fault to pick from; none means the nemesis stays idle.
	Classes []Class
	// Interval is the mean quiet time between faults (0: DefaultInterval).
	Interval time.Duration
	// SessionTimeout is the workers' session timeout (required with Classes): the
	// client faults' holds and session-expire's attach derive from it.
	SessionTimeout time.Duration
	// Seed seeds every random choice.
	Seed int64
	// ServerTargets restricts the targets of server faults (empty: all of
	// ServerTargets()); ClientTargets those of client faults (empty: random or holder);
	// Shapes the partition shapes (empty: all of Shapes()).
	ServerTargets []Target
	ClientTargets []ClientTarget
	Shapes        []Shape
	// ClientHold, when set, is how long a client partition or client pause lasts
	// instead of about twice the session timeout: shorter than a session, the
	// worker's client drops its connection (past its read timeout) and gets its
	// session back once the fault heals, with whatever it sent meanwhile lost. It
	// is also how long a reply loss lasts instead of ReplyLossFraction of a session,
	// and a connection reset instead of ResetFraction.
	ClientHold time.Duration
}

func (s Schedule) withDefaults() Schedule {
	if len(s.ServerTargets) == 0 {
		s.ServerTargets = ServerTargets()
	}
	if len(s.ClientTargets) == 0 {
		s.ClientTargets = ClientTargets()
	}
	if len(s.Shapes) == 0 {
		s.Shapes = Shapes()
	}
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	return s
}

// Validate reports a schedule that cannot run: an unknown class, target or shape, or
// faults without a session timeout.
func (s Schedule) Validate() error {
	for _, c := range s.Classes {
		if _, ok := c.spec(); !ok {
			return fmt.Errorf("schedule: unknown fault class %q", c)
		}
	}
	for _, t := range s.ServerTargets {
		if !slices.Contains(ServerTargets(), t) {
			return fmt.Errorf("schedule: unknown server target %q", t)
		}
	}
	for _, t := range s.ClientTargets {
		if !slices.Contains(ClientTargets(), t) {
			return fmt.Errorf("schedule: unknown client target %q", t)
		}
	}
	for _, sh := range s.Shapes {
		if !slices.Contains(Shapes(), sh) {
			return fmt.Errorf("schedule: unknown partition shape %q", sh)
		}
	}
	if s.Interval < 0 || s.SessionTimeout < 0 || s.ClientHold < 0 {
		return fmt.Errorf("schedule: negative interval, session timeout or client hold")
	}
	if len(s.Classes) > 0 && s.SessionTimeout == 0 {
		return fmt.Errorf("schedule: no session timeout (the workers'; client faults are timed by it)")
	}
	return nil
}

// step is one fault of a schedule.
type step struct {
	gap   time.Duration // quiet time before it
	class Class
	fault fault
	hold  time.Duration
	rng   *rand.Rand // for the fault's own choices (targets)
}

// steps draws a schedule's faults one after another.
type steps struct {
	s   Schedule
	rng *rand.Rand
}

func newSteps(s Schedule) *steps {
	s = s.withDefaults()
	return &steps{s: s, rng: rand.New(rand.NewPCG(uint64(s.Seed), 0x7a6c636b6e656d))}
}

// uniform returns a duration uniform in [lo, hi).
func uniform(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

func (st *steps) next() step {
	s, rng := st.s, st.rng
	var out step
	out.gap = uniform(rng, s.Interval/2, s.Interval*3/2)
	out.class = s.Classes[rng.IntN(len(s.Classes))]
	spec, _ := out.class.spec()
	out.fault = spec.draw(drawer{s: s, rng: rng})
	lo, hi := spec.hold(s)
	out.hold = uniform(rng, lo, hi)
	out.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	return out
}

// LongestHold is the longest a single fault of this schedule stays on (0 for a
// schedule without faults or with only instantaneous ones).
func (s Schedule) LongestHold() time.Duration {
	s = s.withDefaults()
	var longest time.Duration
	for _, c := range s.Classes {
		if spec, ok := c.spec(); ok {
			_, hi := spec.hold(s)
			longest = max(longest, hi)
		}
	}
	return longest
}

// ParseTargets reads a comma-separated list of fault targets and sorts them into
// server targets (one, leader, minority, majority, all) and client targets (random,
// holder). An empty string gives none of either (every target allowed).
func ParseTargets(s string) ([]Target, []ClientTarget, error) {
	var servers []Target
	var clients []ClientTarget
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case slices.Contains(ServerTargets(), Target(name)):
			servers = append(servers, Target(name))
		case slices.Contains(ClientTargets(), ClientTarget(name)):
			clients = append(clients, ClientTarget(name))
		default:
			var valid []string
			for _, t := range ServerTargets() {
				valid = append(valid, string(t))
			}
			for _, t := range ClientTargets() {
				valid = append(valid, string(t))
			}
			return nil, nil, fmt.Errorf("unknown target %q (want some of %s)", name, strings.Join(valid, ", "))
		}
	}
	return servers, clients, nil
}

// ParseShapes reads a comma-separated list of partition shapes; empty gives none
// (every shape allowed).
func ParseShapes(s string) ([]Shape, error) {
	var shapes []Shape
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(Shapes(), Shape(name)) {
			var valid []string
			for _, sh := range Shapes() {
				valid = append(valid, string(sh))
			}
			return nil, fmt.Errorf("unknown partition shape %q (want some of %s)", name, strings.Join(valid, ", "))
		}
		shapes = append(shapes, Shape(name))
	}
	return shapes, nil
}
