package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Class is a kind of fault the schedule can pick.
type Class string

// Fault classes.
const (
	// ClassKill kills servers (Kill), restarting them at the end.
	ClassKill Class = "kill"
	// ClassPause pauses servers (Pause).
	ClassPause Class = "pause"
	// ClassPartition partitions the servers (Partition, any shape).
	ClassPartition Class = "partition"
	// ClassPacket drops a share of servers' packets (Packet, loss only).
	ClassPacket Class = "packet"
	// ClassClientPartition cuts a worker off from every server (ClientPartition).
	ClassClientPartition Class = "client-partition"
	// ClassSessionExpire expires a worker's session (SessionExpire).
	ClassSessionExpire Class = "session-expire"
	// ClassClientPause pauses a worker (ClientPause).
	ClassClientPause Class = "client-pause"
	// ClassClientKill kills a worker (ClientKill).
	ClassClientKill Class = "client-kill"
	// ClassClientServerPartition cuts a server's clients off (ClientServerPartition).
	ClassClientServerPartition Class = "client-server-partition"
	// ClassReplyLoss drops the replies to a worker (ReplyLoss).
	ClassReplyLoss Class = "reply-loss"
)

// Classes lists every fault class, in a fixed order.
func Classes() []Class {
	return []Class{ClassKill, ClassPause, ClassPartition, ClassPacket, ClassClientPartition,
		ClassSessionExpire, ClassClientPause, ClassClientKill, ClassClientServerPartition, ClassReplyLoss}
}

// OnClients reports whether the class's faults land on workers (their network,
// process, session, replies, or their connections to one server) rather than on the
// servers themselves.
func (c Class) OnClients() bool {
	switch c {
	case ClassClientPartition, ClassSessionExpire, ClassClientPause, ClassClientKill, ClassReplyLoss, ClassClientServerPartition:
		return true
	}
	return false
}

// ParseClasses reads a comma-separated list of class names, e.g.
// "kill,partition,client-pause". "none" or an empty string means no faults, "all"
// every class; duplicates are dropped. An unknown name is an error that lists the
// valid ones.
func ParseClasses(s string) ([]Class, error) {
	var out []Class
	seen := map[Class]bool{}
	add := func(c Class) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case "", "none":
			continue
		case "all":
			for _, c := range Classes() {
				add(c)
			}
			continue
		}
		known := false
		for _, c := range Classes() {
			if string(c) == name {
				add(c)
				known = true
			}
		}
		if !known {
			valid := []string{"none", "all"}
			for _, c := range Classes() {
				valid = append(valid, string(c))
			}
			return nil, fmt.Errorf("unknown nemesis fault %q; valid: %s", name, strings.Join(valid, ", "))
		}
	}
	return out, nil
}

// DefaultInterval is the mean quiet time between two faults.
const DefaultInterval = 10 * time.Second

// Schedule says which faults to inflict and how often.
//
// One fault is on at a time. Before each, the nemesis waits a random quiet time,
// uniform in [Interval/2, 3·Interval/2). It then picks a class uniformly among
// Classes and the fault's parameters (target, shape, loss), and holds the fault for a
// class-dependent time:
//
//   - kill, pause, partition, packet, client-server-partition: uniform in
//     [Interval/2, 3·Interval/2);
//   - client-partition, client-pause: uniform in [1.75, 2.25)·SessionTimeout, so the
//     servers expire the worker's session while it is cut off or frozen;
//   - reply-loss: ReplyLossFraction·SessionTimeout (see there);
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
	// SessionTimeout is the workers' session timeout (0: DefaultSessionTimeout).
	SessionTimeout time.Duration
	// Seed seeds every random choice.
	Seed int64
	// ServerTargets restricts the targets of server faults (empty: all of
	// ServerTargets()); ClientTargets those of client faults (empty: random or holder);
	// Shapes the partition shapes (empty: all of Shapes()).
	ServerTargets []Target
	ClientTargets []ClientTarget
	Shapes        []Shape
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
	if s.SessionTimeout <= 0 {
		s.SessionTimeout = DefaultSessionTimeout
	}
	return s
}

// Validate reports a schedule that cannot run: an unknown class.
func (s Schedule) Validate() error {
	for _, c := range s.Classes {
		if !slices.Contains(Classes(), c) {
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
	if s.Interval < 0 || s.SessionTimeout < 0 {
		return fmt.Errorf("schedule: negative interval or session timeout")
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
	iv, sess := s.Interval, s.SessionTimeout
	var out step
	out.gap = uniform(rng, iv/2, iv*3/2)
	out.class = s.Classes[rng.IntN(len(s.Classes))]
	serverTarget := func() Target { return s.ServerTargets[rng.IntN(len(s.ServerTargets))] }
	clientTarget := func() ClientTarget { return s.ClientTargets[rng.IntN(len(s.ClientTargets))] }
	serverHold := func() time.Duration {
		lo, hi := serverHoldRange(iv)
		return uniform(rng, lo, hi)
	}
	clientHold := func() time.Duration {
		lo, hi := clientHoldRange(sess)
		return uniform(rng, lo, hi)
	}
	switch out.class {
	case ClassKill:
		out.fault, out.hold = Kill{Target: serverTarget()}, serverHold()
	case ClassPause:
		out.fault, out.hold = Pause{Target: serverTarget()}, serverHold()
	case ClassPartition:
		out.fault = Partition{Shape: s.Shapes[rng.IntN(len(s.Shapes))]}
		out.hold = serverHold()
	case ClassPacket:
		out.fault = Packet{Target: serverTarget(), Loss: 10 + rng.IntN(41)}
		out.hold = serverHold()
	case ClassClientPartition:
		out.fault, out.hold = ClientPartition{Target: clientTarget()}, clientHold()
	case ClassSessionExpire:
		out.fault = SessionExpire{Target: clientTarget(), SessionTimeout: sess}
	case ClassClientPause:
		out.fault, out.hold = ClientPause{Target: clientTarget()}, clientHold()
	case ClassClientKill:
		out.fault = ClientKill{Target: clientTarget()}
	case ClassClientServerPartition:
		t := serverTarget()
		if t != TargetLeader {
			t = TargetOne // a client-server partition cuts the clients of one server
		}
		out.fault, out.hold = ClientServerPartition{Target: t}, serverHold()
	case ClassReplyLoss:
		out.fault = ReplyLoss{Target: clientTarget()}
		out.hold = replyLossHold(sess)
	}
	out.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	return out
}

// serverHoldRange is how long a server-side fault lasts: around the mean interval.
func serverHoldRange(interval time.Duration) (lo, hi time.Duration) {
	return interval / 2, interval * 3 / 2
}

// clientHoldRange is how long a client partition or pause lasts: about twice the
// session timeout, so that the session certainly expires meanwhile.
func clientHoldRange(sessionTimeout time.Duration) (lo, hi time.Duration) {
	return time.Duration(1.75 * float64(sessionTimeout)), time.Duration(2.25 * float64(sessionTimeout))
}

func replyLossHold(sessionTimeout time.Duration) time.Duration {
	return time.Duration(ReplyLossFraction * float64(sessionTimeout))
}

// LongestHold is the longest a single fault of this schedule stays on (0 for a
// schedule without faults or with only instantaneous ones).
func (s Schedule) LongestHold() time.Duration {
	s = s.withDefaults()
	var longest time.Duration
	for _, c := range s.Classes {
		var hold time.Duration
		switch c {
		case ClassKill, ClassPause, ClassPartition, ClassPacket, ClassClientServerPartition:
			_, hold = serverHoldRange(s.Interval)
		case ClassClientPartition, ClassClientPause:
			_, hold = clientHoldRange(s.SessionTimeout)
		case ClassReplyLoss:
			hold = replyLossHold(s.SessionTimeout)
		}
		longest = max(longest, hold)
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
