package nemesis

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
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
	// ClassRestart kills servers and starts them again at once (Restart): a Redis
	// instance keeps what its persistence kept.
	ClassRestart Class = "restart"
	// ClassFailover loses a grant to a replica promotion (Failover; Redis replicas).
	ClassFailover Class = "failover"
	// ClassClockJump jumps one Redis instance's clock forward, as its keys' expiries
	// see it (ClockJump).
	ClassClockJump Class = "clock-jump"
	// ClassConnectionKill closes a worker's connection from a Redis instance's side
	// (ConnectionKill).
	ClassConnectionKill Class = "connection-kill"
	// ClassClientVanish makes a worker's host vanish without closing its connections
	// (ClientVanish): a database keeps its session's locks until TCP keepalive.
	ClassClientVanish Class = "client-vanish"
	// ClassCompaction compacts an etcd cluster's history of revisions up to now
	// (Compaction): a waiter watching from an older revision gets ErrCompacted.
	ClassCompaction Class = "compaction"
	// ClassCoordinationPartition partitions the servers on their coordination ports
	// only (Partition with Coordination): their failure detection and elections
	// (Redis Sentinel's sentinels, a Redis Cluster's bus) are cut, their clients and
	// replication are not.
	ClassCoordinationPartition Class = "coordination-partition"
	// ClassConnectionReset silences a worker's connections to the servers for a
	// moment, then resets them (ConnectionReset): what it sent meanwhile is lost for
	// good, and it reconnects at once to a live session.
	ClassConnectionReset Class = "connection-reset"
)

// classSpec is one fault class of the catalogue: everything the schedule knows about
// it.
type classSpec struct {
	class Class
	// server is set for a fault done to the servers' hosts (ServerHost), clear for
	// one done to a worker.
	server bool
	// draw makes a fault of the class, drawing its parameters (targets, shape, loss)
	// from the schedule's random choices.
	draw func(d drawer) fault
	// hold is how long the schedule holds a fault of the class: uniform in [lo, hi);
	// lo == hi is a fixed time, 0 an instantaneous fault.
	hold func(s Schedule) (lo, hi time.Duration)
	// named is set for a class a run names explicitly, never among Classes() ("all"):
	// the classes made for Redis and the databases (issues 25, 26) and client-vanish.
	// "all" stays what it was, so that a seed's schedule under "all" does not change.
	named bool
	// needs is the ability a service must have for the class (kind.Kind.Can; 0:
	// every service takes it).
	needs kind.Ability
}

// catalogue lists every fault class, in a fixed order: the one place a class is
// added. Classes, the schedule's draws and LongestHold all read it. Each draw takes
// its parameters from the generator in the order written, and before the hold: a
// seed's schedule depends on that order.
func catalogue() []classSpec {
	return []classSpec{
		{ClassKill, true, func(d drawer) fault { return Kill{Target: d.serverTarget()} }, serverHold, false, 0},
		{ClassPause, true, func(d drawer) fault { return Pause{Target: d.serverTarget()} }, serverHold, false, 0},
		{ClassPartition, true, func(d drawer) fault { return Partition{Shape: d.shape()} }, serverHold, false, 0},
		{ClassPacket, true, func(d drawer) fault {
			return Packet{Target: d.serverTarget(), Loss: 10 + d.rng.IntN(41)}
		}, serverHold, false, 0},
		{ClassClientPartition, false, func(d drawer) fault { return ClientPartition{Target: d.clientTarget()} }, clientHold, false, 0},
		{ClassSessionExpire, false, func(d drawer) fault {
			return SessionExpire{Target: d.clientTarget(), SessionTimeout: d.s.SessionTimeout}
		}, noHold, false, kind.ExpireSession},
		{ClassClientPause, false, func(d drawer) fault { return ClientPause{Target: d.clientTarget()} }, clientHold, false, 0},
		{ClassClientKill, false, func(d drawer) fault { return ClientKill{Target: d.clientTarget()} }, noHold, false, 0},
		{ClassClientServerPartition, true, func(d drawer) fault {
			t := d.serverTarget()
			if t != TargetLeader {
				t = TargetOne // a client-server partition cuts the clients of one server
			}
			return ClientServerPartition{Target: t}
		}, serverHold, false, 0},
		{ClassReplyLoss, false, func(d drawer) fault { return ReplyLoss{Target: d.clientTarget()} }, replyLossHold, false, 0},
		{ClassRestart, true, func(d drawer) fault { return Restart{Target: d.serverTarget()} }, noHold, true, 0},
		{ClassFailover, true, func(d drawer) fault { return Failover{} }, noHold, true, kind.Failover},
		{ClassClockJump, true, func(d drawer) fault {
			return ClockJump{Target: d.serverTarget(), Delta: DefaultClockJump(d.s.SessionTimeout)}
		}, noHold, true, kind.JumpClock},
		{ClassConnectionKill, false, func(d drawer) fault { return ConnectionKill{Target: d.clientTarget()} }, noHold, true, kind.KillConnection},
		{ClassClientVanish, false, func(d drawer) fault { return ClientVanish{Target: d.clientTarget()} }, noHold, true, 0},
		{ClassCompaction, true, func(d drawer) fault { return Compaction{} }, noHold, true, kind.Compact},
		{ClassCoordinationPartition, true, func(d drawer) fault { return Partition{Shape: d.shape(), Coordination: true} }, serverHold, true, kind.Coordinate},
		{ClassConnectionReset, false, func(d drawer) fault { return ConnectionReset{Target: d.clientTarget()} }, resetHold, true, 0},
	}
}

// drawer draws a fault's parameters for the schedule s.
type drawer struct {
	s   Schedule
	rng *rand.Rand
}

func (d drawer) serverTarget() Target { return d.s.ServerTargets[d.rng.IntN(len(d.s.ServerTargets))] }

func (d drawer) clientTarget() ClientTarget {
	return d.s.ClientTargets[d.rng.IntN(len(d.s.ClientTargets))]
}

func (d drawer) shape() Shape { return d.s.Shapes[d.rng.IntN(len(d.s.Shapes))] }

// serverHold: a server-side fault lasts around the mean interval.
func serverHold(s Schedule) (lo, hi time.Duration) {
	return s.Interval / 2, s.Interval * 3 / 2
}

// clientHold: a client partition or pause lasts about twice the session timeout, so
// that the session certainly expires meanwhile, unless the schedule says
// (Schedule.ClientHold).
func clientHold(s Schedule) (lo, hi time.Duration) {
	if s.ClientHold > 0 {
		return s.ClientHold, s.ClientHold
	}
	return time.Duration(1.75 * float64(s.SessionTimeout)), time.Duration(2.25 * float64(s.SessionTimeout))
}

// replyLossHold: see ReplyLossFraction, unless the schedule says
// (Schedule.ClientHold).
func replyLossHold(s Schedule) (lo, hi time.Duration) {
	if s.ClientHold > 0 {
		return s.ClientHold, s.ClientHold
	}
	d := time.Duration(ReplyLossFraction * float64(s.SessionTimeout))
	return d, d
}

// resetHold: ResetFraction of a session timeout, unless the schedule says
// (Schedule.ClientHold).
func resetHold(s Schedule) (lo, hi time.Duration) {
	if s.ClientHold > 0 {
		return s.ClientHold, s.ClientHold
	}
	d := time.Duration(ResetFraction * float64(s.SessionTimeout))
	return d, d
}

// noHold: the fault is over once applied.
func noHold(Schedule) (lo, hi time.Duration) { return 0, 0 }

// spec returns c's entry in the catalogue.
func (c Class) spec() (classSpec, bool) {
	for _, s := range catalogue() {
		if s.class == c {
			return s, true
		}
	}
	return classSpec{}, false
}

// ServerFault reports whether faults of class c are done to the servers (through
// their ServerHost) rather than to workers: a run whose servers the harness does not
// manage cannot have them.
func (c Class) ServerFault() bool {
	s, _ := c.spec()
	return s.server
}

// OnClients reports whether the class's faults can cut a running worker off from its
// session (a fault on the worker itself, or a client-server partition that cuts a
// server's clients off): a holder then may outlive its session, which a workload
// that varies itself must give the time to show (workloads.StandardRegimes).
func (c Class) OnClients() bool { return !c.ServerFault() || c == ClassClientServerPartition }

// Classes lists the fault classes "all" means, in a fixed order: every service has
// them. The others are NamedClasses.
func Classes() []Class { return classes(false) }

// NamedClasses lists the classes a run names explicitly: the ones made for Redis and
// the databases (restart, failover, clock-jump, connection-kill) and client-vanish.
func NamedClasses() []Class { return classes(true) }

// Needs is the ability a service must have for faults of class c (0: every service
// takes them): a run on a kind of service without it refuses the class
// (kind.Kind.Refuse).
func (c Class) Needs() kind.Ability {
	s, _ := c.spec()
	return s.needs
}

// MinServers is how many servers a run needs for faults of class c: a partition
// cuts servers off from each other (Grudge), so it needs two; every other class
// takes one. A run with fewer refuses the class (on one Redis instance a partition
// would only be a fault that fails, taking a fault's place in the schedule).
func (c Class) MinServers() int {
	if c == ClassPartition || c == ClassCoordinationPartition {
		return 2
	}
	return 1
}

func classes(named bool) []Class {
	var out []Class
	for _, s := range catalogue() {
		if s.named == named {
			out = append(out, s.class)
		}
	}
	return out
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
		if _, known := Class(name).spec(); !known {
			valid := []string{"none", "all"}
			for _, c := range append(Classes(), NamedClasses()...) {
				valid = append(valid, string(c))
			}
			return nil, fmt.Errorf("unknown nemesis fault %q; valid: %s", name, strings.Join(valid, ", "))
		}
		add(Class(name))
	}
	return out, nil
}

// Setup is a named fault setup: the classes of fault a run's nemesis draws from, the
// targets and partition shapes it aims them at (empty: any), and how often. The
// safety matrix's columns (Setups) and explore's probes are setups; a run takes one
// whole (harness.Config.WithSetup).
type Setup struct {
	// Name names the setup: a matrix column (`matrix --faults`), an explore probe.
	Name string `json:"name"`
	// Label says what the setup does, for a person ("" : the name says it).
	Label string `json:"label,omitempty"`
	// Classes are the fault classes (none: a fault-free run).
	Classes       []Class        `json:"faults,omitempty"`
	ServerTargets []Target       `json:"server_targets,omitempty"`
	ClientTargets []ClientTarget `json:"client_targets,omitempty"`
	Shapes        []Shape        `json:"shapes,omitempty"`
	// Interval is the mean quiet time between faults (0: the run's).
	Interval time.Duration `json:"interval_ns,omitempty"`
	// ClientHold is how long a client partition, pause, reply loss or connection reset lasts (0: the
	// class's own; Schedule.ClientHold).
	ClientHold time.Duration `json:"client_hold_ns,omitempty"`
}

// Setups are the named setups of the safety matrix, one column each: no faults, the
// server faults, and each client fault that can break a recipe, aimed at the holder.
func Setups() []Setup {
	holder := []ClientTarget{TargetHolder}
	return []Setup{
		{Name: "none", Label: "no faults"},
		{Name: "server", Label: "servers killed, paused, partitioned", Classes: []Class{ClassKill, ClassPause, ClassPartition}},
		{Name: "client-partition", Label: "the holder cut off", Classes: []Class{ClassClientPartition}, ClientTargets: holder},
		{Name: "session-expire", Label: "the holder's session expired", Classes: []Class{ClassSessionExpire}, ClientTargets: holder},
		{Name: "client-pause", Label: "the holder paused", Classes: []Class{ClassClientPause}, ClientTargets: holder},
		{Name: "isolate-follower-quorum", Label: "a follower or observer cut off from its peers, not its clients", Classes: []Class{ClassPartition}, Shapes: []Shape{IsolateFollowerQuorum}},
	}
}

// NamedSetups are the named setups of the faults a run names explicitly
// (NamedClasses), the safety matrix's further columns when a row is a Redis or a
// database recipe: an instance restarted at once, a failover, a clock jump, the
// holder's connection killed by the server, the holder's host gone without a word,
// and (etcd) a compaction. Their faults are instantaneous, so they come every NamedSetupInterval on
// average. A setup whose faults a row's service or topology refuses is "n/a" there
// (harness.Config.Validate says which).
func NamedSetups() []Setup {
	holder := []ClientTarget{TargetHolder}
	return []Setup{
		{Name: "restart", Label: "an instance killed and started again at once", Classes: []Class{ClassRestart}, Interval: NamedSetupInterval},
		{Name: "failover", Label: "a replica promoted after a grant it never saw", Classes: []Class{ClassFailover}, Interval: NamedSetupInterval},
		{Name: "clock-jump", Label: "an instance's clock jumped forward", Classes: []Class{ClassClockJump}, Interval: NamedSetupInterval},
		{Name: "connection-kill", Label: "the holder's connection killed by the server", Classes: []Class{ClassConnectionKill}, ClientTargets: holder, Interval: NamedSetupInterval},
		{Name: "client-vanish", Label: "the holder's host gone without a word", Classes: []Class{ClassClientVanish}, ClientTargets: holder, Interval: NamedSetupInterval},
		{Name: "compaction", Label: "the history of revisions compacted while waiters wait", Classes: []Class{ClassCompaction}, Interval: NamedSetupInterval},
	}
}

// NamedSetupInterval is the mean quiet time between the faults of NamedSetups.
const NamedSetupInterval = 5 * time.Second
