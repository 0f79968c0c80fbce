package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	_ Fault = (*Kill)(nil)
	_ Fault = (*Pause)(nil)
	_ Fault = (*Partition)(nil)
	_ Fault = (*Packet)(nil)
	_ fault = (*Kill)(nil)
	_ fault = (*Pause)(nil)
	_ fault = (*Partition)(nil)
	_ fault = (*Packet)(nil)
)

// Kill SIGKILLs servers through their hosts (ServerHost.Kill); Undo starts those of
// them that are still down again (ServerHost.Start, same data dir).
type Kill struct {
	// Target says which servers.
	Target Target
}

// Apply kills the target servers.
func (f Kill) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f Kill) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassKill), "target": string(f.Target)}
	ids, err := pickRecorded(ctx, c, v, f.Target, rng)
	if err != nil {
		return plan{value: v}, err
	}
	recordSessionsEnd(c, v)
	if persistence := redisPersistence(c); persistence != "" {
		// A killed Redis instance comes back at the heal with what it persisted:
		// recorded as a restart's is, for the cause classes.
		v["persistence"] = persistence
		v["forgetting"] = forgetting(ctx, c, ids)
	}
	ss := serversByID(c, ids)
	return plan{
		value: v,
		apply: func(ctx context.Context) error {
			var errs []error
			for _, s := range ss {
				if err := s.Host.Kill(ctx); err != nil {
					errs = append(errs, fmt.Errorf("kill server %d: %w", s.ID, err))
				}
			}
			return errors.Join(errs...)
		},
		undo: func(ctx context.Context) error {
			var errs []error
			for _, s := range ss {
				if s.Host.Pid() != 0 {
					continue
				}
				if err := s.Host.Start(ctx); err != nil {
					errs = append(errs, fmt.Errorf("restart server %d: %w", s.ID, err))
				}
			}
			return errors.Join(errs...)
		},
	}, nil
}

// Pause stops servers' process groups with SIGSTOP; Undo resumes them with SIGCONT.
type Pause struct {
	// Target says which servers.
	Target Target
}

// Apply pauses the target servers.
func (f Pause) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f Pause) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassPause), "target": string(f.Target)}
	ids, err := pickRecorded(ctx, c, v, f.Target, rng)
	if err != nil {
		return plan{value: v}, err
	}
	pids := map[string]int{}
	var hosts []ServerHost
	var down []string
	for _, s := range serversByID(c, ids) {
		if pid := s.Host.Pid(); pid > 0 {
			pids[serverName(s.ID)] = pid
			hosts = append(hosts, s.Host)
		} else {
			down = append(down, serverName(s.ID))
		}
	}
	v["pids"] = pids
	if len(down) > 0 {
		v["not_running"] = down
	}
	return plan{value: v, apply: signalHosts(hosts, syscall.SIGSTOP), undo: resumeHosts(hosts)}, nil
}

func stopGroups(pids []int) func(context.Context) error {
	return func(context.Context) error {
		var errs []error
		for _, pid := range pids {
			errs = append(errs, signalGroup(pid, syscall.SIGSTOP))
		}
		return errors.Join(errs...)
	}
}

func resumeGroups(pids []int) func(context.Context) error {
	return func(context.Context) error {
		var errs []error
		for _, pid := range pids {
			errs = append(errs, resumeGroup(pid))
		}
		return errors.Join(errs...)
	}
}

// Partition cuts the servers apart at the packet level: each server's namespace gets
// an nftables table zlc_partition whose input chain drops packets from the servers it
// has a grudge against (see Grudge). Clients are not affected. Undo deletes the tables.
type Partition struct {
	// Shape is the partition's form.
	Shape Shape
	// Coordination limits the drops to the servers' coordination ports, to or from
	// them (Coordinated): their failure detection and elections are cut apart, and
	// replication and everything else between them still flows.
	Coordination bool
}

// Coordinated is a service whose servers watch each other and elect over ports of
// their own, apart from their clients' and replication's (Redis Sentinel's port, a
// Redis Cluster's bus port): what a coordination partition cuts. None: the servers
// have no such ports.
type Coordinated interface {
	CoordinationPorts() []uint16
}

// Apply partitions the servers.
func (f Partition) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f Partition) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassPartition), "shape": string(f.Shape)}
	match, err := f.match(c, v)
	if err != nil {
		return plan{value: v}, err
	}
	ss := sortedServers(c)
	ids := make([]int, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	shape, leader := f.Shape, 0
	if shape == IsolateLeader || shape == IsolateFollowerQuorum {
		if id, ok := c.Leader(ctx); ok {
			leader = id
			v["leader"] = serverName(id)
		} else if shape == IsolateLeader {
			shape = IsolateOne
			v["shape"] = string(IsolateOne)
			v["requested"] = string(IsolateLeader)
			v["note"] = "no leader: isolated a random server"
		} else {
			v["note"] = "no leader: cut off a random server"
		}
	}
	// The quorum's shapes cut the voters; isolate-one and isolate-follower-quorum
	// cut off any server, an observer too. A server the shape leaves out drops
	// nothing.
	over := ids
	if shape != IsolateOne && shape != IsolateFollowerQuorum {
		over = voters(ss)
	}
	var g map[int][]int
	if f, ok := holdersFollower(ctx, c, shape, leader, v); ok {
		g = complete(ids, []int{f}, without(ids, f))
	} else if g, err = Grudge(shape, over, leader, rng); err != nil {
		if len(over) < len(ids) {
			err = fmt.Errorf("%w (of the voting servers: the quorum's shapes leave observers out)", err)
		}
		return plan{value: v}, err
	}
	for _, id := range ids {
		if _, ok := g[id]; !ok {
			g[id] = []int{}
		}
	}
	if shape == IsolateFollowerQuorum {
		// The server cut off, and its role: a follower's or an observer's sync
		// window (the cause class names it).
		for _, s := range ss {
			if s.ID != leader && len(g[s.ID]) == len(ids)-1 {
				v["cut_off"], v["cut_off_role"] = serverName(s.ID), s.role()
			}
		}
	}
	v["grudge"] = grudgeValue(g)
	type rule struct {
		host  ServerHost
		drops []netip.Addr
	}
	var rules []rule
	var touched []netHost
	for _, s := range ss {
		var drops []netip.Addr
		for _, id := range g[s.ID] {
			peer, _ := serverByID(ss, id)
			drops = append(drops, peer.Host.Addr())
		}
		if len(drops) > 0 {
			rules = append(rules, rule{s.Host, drops})
			touched = append(touched, s.Host)
		}
	}
	return plan{
		value: v,
		nets:  touched,
		apply: func(ctx context.Context) error {
			for _, r := range rules {
				set, err := addrSet(r.drops)
				if err != nil {
					return err
				}
				var rules []string
				for _, m := range match {
					rules = append(rules, "ip saddr "+set+m+" drop")
				}
				if err := nftReplace(ctx, r.host, tablePartition, chain("input", rules...)); err != nil {
					return err
				}
			}
			return nil
		},
		undo: deleteTables(touched, tablePartition),
	}, nil
}

// match is what a partition's drop rules add to the peer's address: nothing (every
// packet), or, for a coordination partition, the packets to or from the service's
// coordination ports (noted in v).
func (f Partition) match(c Cluster, v map[string]any) ([]string, error) {
	if !f.Coordination {
		return []string{""}, nil
	}
	v["fault"] = string(ClassCoordinationPartition)
	co, ok := abilityOf[Coordinated](c)
	var ports []uint16
	if ok {
		ports = co.CoordinationPorts()
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("%s: the servers have no coordination ports of their own (Redis's sentinel and cluster topologies have)", ClassCoordinationPartition)
	}
	v["ports"] = ports
	words := make([]string, len(ports))
	for i, p := range ports {
		words[i] = strconv.Itoa(int(p))
	}
	set := "{ " + strings.Join(words, ", ") + " }"
	return []string{" tcp dport " + set, " tcp sport " + set}, nil
}

// holdersFollower aims an isolate-follower-quorum partition at the server the lock
// holder is connected to, when there is a holder on a server other than the leader
// (a follower or an observer): the zombie-holder case (that server goes on answering
// the holder for syncLimit x tickTime while the leader expires its session). It
// notes the holder in v.
func holdersFollower(ctx context.Context, c Cluster, shape Shape, leader int, v map[string]any) (int, bool) {
	if shape != IsolateFollowerQuorum || leader == 0 {
		return 0, false
	}
	h, ok := c.Holder()
	if !ok {
		return 0, false
	}
	id, ok := c.ServerOf(ctx, h)
	if !ok || id == leader {
		return 0, false
	}
	v["holder"], v["holder_server"] = h.Process, serverName(id)
	return id, true
}

func deleteTables(hosts []netHost, kind string) func(context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, h := range hosts {
			errs = append(errs, nftDelete(ctx, h, kind))
		}
		return errors.Join(errs...)
	}
}

// Packet degrades the target servers' links. Loss alone is done with nftables (table
// zlc_packet: each packet in and out of the server's link is dropped with probability
// Loss percent), which works on every kernel. Delay and Jitter need tc's netem qdisc:
// Apply tries it and, on a kernel without sch_netem, fails with a
// *NetemUnavailableError having changed nothing; with netem, delay, jitter and loss are
// all done by netem on the server's link (outgoing packets). Undo deletes the table
// or the qdisc.
type Packet struct {
	// Target says which servers.
	Target Target
	// Loss is the percentage of packets dropped, 0..100.
	Loss int
	// Delay is added to each packet (needs netem).
	Delay time.Duration
	// Jitter varies Delay by up to ± Jitter (needs netem and a Delay).
	Jitter time.Duration
}

// Apply degrades the target servers' links.
func (f Packet) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f Packet) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassPacket), "target": string(f.Target)}
	if f.Loss < 0 || f.Loss > 100 || f.Delay < 0 || f.Jitter < 0 {
		return plan{value: v}, fmt.Errorf("packet: loss must be 0..100 %% and delays not negative (loss %d, delay %s, jitter %s)", f.Loss, f.Delay, f.Jitter)
	}
	if f.Jitter > 0 && f.Delay == 0 {
		return plan{value: v}, fmt.Errorf("packet: jitter needs a delay")
	}
	if f.Loss == 0 && f.Delay == 0 {
		return plan{value: v}, fmt.Errorf("packet: nothing to do (no loss, no delay)")
	}
	ids, err := pickRecorded(ctx, c, v, f.Target, rng)
	if err != nil {
		return plan{value: v}, err
	}
	nss := serverHosts(serversByID(c, ids))
	if f.Loss > 0 {
		v["loss_percent"] = f.Loss
	}
	if f.Delay == 0 {
		v["via"] = "nftables"
		return plan{
			value: v,
			nets:  nss,
			apply: func(ctx context.Context) error {
				for _, ns := range nss {
					link, err := hostLink(ctx, ns)
					if err != nil {
						return err
					}
					lossRule := func(dir string) string {
						return fmt.Sprintf(`%s "%s" numgen random mod 100 < %d counter drop`, dir, link, f.Loss)
					}
					if err := nftReplace(ctx, ns, tablePacket,
						chain("input", lossRule("iifname")), chain("output", lossRule("oifname"))); err != nil {
						return err
					}
				}
				return nil
			},
			undo: deleteTables(nss, tablePacket),
		}, nil
	}
	v["via"] = "netem"
	v["delay_ms"] = f.Delay.Milliseconds()
	args := []string{"delay", ms(f.Delay)}
	if f.Jitter > 0 {
		v["jitter_ms"] = f.Jitter.Milliseconds()
		args = append(args, ms(f.Jitter))
	}
	if f.Loss > 0 {
		args = append(args, "loss", strconv.Itoa(f.Loss)+"%")
	}
	return plan{
		value: v,
		nets:  nss,
		apply: func(ctx context.Context) error {
			for _, ns := range nss {
				if err := netemReplace(ctx, ns, args); err != nil {
					return err
				}
			}
			return nil
		},
		undo: func(ctx context.Context) error {
			var errs []error
			for _, ns := range nss {
				errs = append(errs, netemDelete(ctx, ns))
			}
			return errors.Join(errs...)
		},
	}, nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + "ms"
}
