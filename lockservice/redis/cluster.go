package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// The cluster topology: a Redis Cluster of clusterPrimaries primaries, each serving
// a third of the hash slots, and (with 6 instances) a replica of each, every
// instance in its own namespace with cluster-enabled. The tool forms it itself
// (CLUSTER MEET, ADDSLOTSRANGE, REPLICATE) and waits until every instance says the
// cluster is ok. The run performs no failover: when a primary has been out of reach
// of the majority of primaries for the node timeout, they mark it failed and its
// replica promotes itself, as in the deployments teams run. A key lives on the
// primary that serves its slot (redisopt.KeySlot): the harness reads the lock
// there, and the workers' clients (go-redis's cluster client) send it there.

// clusterPrimaries is how many primaries the cluster topology has.
const clusterPrimaries = 3

// ClusterSettings are the cluster topology's settings, as config.json records them
// (zero: withDefaults').
type ClusterSettings struct {
	// NodeTimeout is how long a primary may be out of reach before the others mark
	// it failed and its replica takes over, and how long a primary cut off from
	// the majority goes on taking writes (cluster-node-timeout).
	NodeTimeout time.Duration `json:"node_timeout_ns,omitempty"`
}

// defaultNodeTimeout is the cluster's node timeout unless set: a second (Redis's
// default is 15 s; a run is seconds long).
const defaultNodeTimeout = time.Second

// withDefaults fills what is unset.
func (c ClusterSettings) withDefaults() ClusterSettings {
	if c.NodeTimeout == 0 {
		c.NodeTimeout = defaultNodeTimeout
	}
	return c
}

// validate names the setting that cannot be.
func (c ClusterSettings) validate() error {
	if c.NodeTimeout < 0 || (c.NodeTimeout > 0 && (c.NodeTimeout < 100*time.Millisecond || c.NodeTimeout%time.Millisecond != 0)) {
		return fmt.Errorf("redis-cluster-node-timeout: want whole milliseconds, at least 100ms, got %s", c.NodeTimeout)
	}
	return nil
}

// clusterNodes reports settings the cluster topology cannot run with nodes
// instances, naming the flag.
func clusterNodes(nodes int) error {
	if nodes != clusterPrimaries && nodes != 2*clusterPrimaries {
		return fmt.Errorf("nodes: the cluster topology is %d primaries with a replica each (--nodes %d, the default) or %d primaries without replicas (--nodes %d), got --nodes %d",
			clusterPrimaries, 2*clusterPrimaries, clusterPrimaries, clusterPrimaries, nodes)
	}
	return nil
}

// clusterFits refuses what the cluster topology cannot run yet: an existing
// cluster or SSH nodes, a recipe of the catalogue whose client has no cluster
// mode (its own recipe's worker says so at init), and the Redis faults that act
// on one instance's keys as if it held them all.
func clusterFits(p lockservice.Plan) error {
	switch {
	case p.Connect != "":
		return errors.New("redis-topology cluster: zlockcheck forms the cluster itself; an existing Redis Cluster (--connect) is not supported yet")
	case p.SSH != nil:
		return errors.New("redis-topology cluster: not on --ssh-nodes yet (the cluster's instances run in the run's namespaces)")
	case p.Catalogued && !p.Cluster:
		return fmt.Errorf("recipe %s has no Redis Cluster mode here: on --redis-topology cluster run a catalogue lock whose client follows the cluster's slots (docs/redis.md lists them), or your own (exec)", p.Recipe)
	}
	for _, cl := range p.Faults {
		if cl == nemesis.ClassClockJump {
			return errors.New("nemesis clock-jump: not on --redis-topology cluster yet (its script shortens the TTLs of one instance's keys, and a target may be a replica)")
		}
	}
	return nil
}

// clusterLines are the redis.conf lines of an instance of the cluster topology,
// its cluster state kept in nodesFile (Redis rewrites it as the cluster changes).
func clusterLines(c ClusterSettings, nodesFile string) []string {
	c = c.withDefaults()
	return []string{
		"cluster-enabled yes",
		"cluster-config-file " + quoteConf(nodesFile),
		fmt.Sprintf("cluster-node-timeout %d", c.NodeTimeout.Milliseconds()),
	}
}

// slotRange is a range of hash slots, both ends included.
type slotRange struct{ lo, hi int }

// contains reports whether slot is in the range.
func (s slotRange) contains(slot int) bool { return s.lo <= slot && slot <= s.hi }

// primaryRanges are the slots each of n primaries serves: n ranges, in order,
// that cover every slot.
func primaryRanges(n int) []slotRange {
	out := make([]slotRange, n)
	for i := range out {
		out[i] = slotRange{lo: i * redisopt.SlotCount / n, hi: (i+1)*redisopt.SlotCount/n - 1}
	}
	return out
}

// replicaOf is the instance (by number) that instance id replicates in a cluster of
// n instances, 0 for a primary: instance primaries+k replicates instance k.
func replicaOf(id, n int) int {
	if n <= clusterPrimaries || id <= clusterPrimaries {
		return 0
	}
	return id - clusterPrimaries
}

// clusterNode is one line of CLUSTER NODES: an instance as one instance sees it.
type clusterNode struct {
	id string
	// addr is its client address, ip:port.
	addr  string
	flags []string
	// primary is the id of the primary it replicates ("" for a primary).
	primary string
	// epoch is its configuration epoch: of the slots two primaries claim, the one
	// with the higher epoch serves them.
	epoch     int64
	connected bool
	slots     []slotRange
}

// has reports whether the node has flag f (myself, master, slave, fail, fail?,
// handshake, noaddr, ...).
func (n clusterNode) has(f string) bool { return slices.Contains(n.flags, f) }

// parseClusterNodes reads CLUSTER NODES: one node a line, "<id> <ip:port@bus[,host]>
// <flags> <primary|-> <ping-sent> <pong-recv> <epoch> <link-state> <slot>...", a
// slot a number or a range lo-hi; a slot being moved ("[slot->-id]") is left out.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var out []clusterNode
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES: want at least 8 fields, got %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("CLUSTER NODES: address %q: %w", f[1], err)
		}
		epoch, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES: epoch %q: %w", f[6], err)
		}
		n := clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), epoch: epoch, connected: f[7] == "connected"}
		if f[3] != "-" {
			n.primary = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, errA := strconv.Atoi(lo)
			b, errB := strconv.Atoi(hi)
			if errA != nil || errB != nil || a < 0 || b < a || b >= redisopt.SlotCount {
				return nil, fmt.Errorf("CLUSTER NODES: slots %q of node %s", s, n.id)
			}
			n.slots = append(n.slots, slotRange{lo: a, hi: b})
		}
		out = append(out, n)
	}
	return out, nil
}

// slotOwner is the address of the primary that serves slot, as the instances'
// views (each one's CLUSTER NODES) tell it: of the primaries any view says serve
// it, the one with the highest configuration epoch, the cluster's own rule (an
// old primary cut off from the others still claims its slots in its own view, with
// the epoch it had). False when no view has a primary serving it.
func slotOwner(views [][]clusterNode, slot int) (string, bool) {
	var best clusterNode
	found := false
	for _, view := range views {
		if n, ok := claimOf(view, slot); ok && (!found || newer(n, best)) {
			best, found = n, true
		}
	}
	return best.addr, found
}

// claimOf is the primary one view says serves slot: of the primaries it lists
// serving it (one, unless the view is mid-change), the one with the highest
// configuration epoch. False when it lists none.
func claimOf(view []clusterNode, slot int) (clusterNode, bool) {
	var best clusterNode
	found := false
	for _, n := range view {
		if n.has("master") && servesSlot(n, slot) && (!found || newer(n, best)) {
			best, found = n, true
		}
	}
	return best, found
}

// servesSlot reports whether node n lists slot among its slots.
func servesSlot(n clusterNode, slot int) bool {
	return slices.ContainsFunc(n.slots, func(s slotRange) bool { return s.contains(slot) })
}

// newer reports whether a's claim beats b's: a higher configuration epoch, or on a
// tie the lower address (so that the choice does not depend on the views' order).
func newer(a, b clusterNode) bool {
	return a.epoch > b.epoch || (a.epoch == b.epoch && a.addr < b.addr)
}

// clusterViews asks every instance for CLUSTER NODES at once; an instance that
// does not answer has no view.
func (r *Redis) clusterViews(ctx context.Context) ([][]clusterNode, error) {
	views := make([][]clusterNode, len(r.Instances))
	errs := make([]error, len(r.Instances))
	var wg sync.WaitGroup
	for i, in := range r.Instances {
		wg.Go(func() {
			v, err := r.do(ctx, in, "CLUSTER", "NODES")
			if err == nil {
				var text string
				if text, err = replyString(v); err == nil {
					views[i], err = parseClusterNodes(text)
				}
			}
			if err != nil {
				errs[i] = fmt.Errorf("redis instance %d: %w", in.ID, err)
			}
		})
	}
	wg.Wait()
	if slices.IndexFunc(views, func(v []clusterNode) bool { return v != nil }) < 0 {
		return nil, errors.Join(errs...)
	}
	return views, nil
}

// home is the instance a key lives on: on the cluster topology the primary that
// serves its slot (slotOwner over every instance's view); elsewhere instance 1
// (single; replicas: the primary the files name).
func (r *Redis) home(ctx context.Context, key string) (*lockservice.Member, error) {
	if r.cfg.Topology != RedisCluster {
		return r.Instances[0], nil
	}
	views, err := r.clusterViews(ctx)
	if err != nil {
		return nil, fmt.Errorf("redis cluster: no instance says who serves %s: %w", key, err)
	}
	return r.homeIn(views, key)
}

// homeIn is the cluster's instance that serves key's slot as views (clusterViews)
// tell it.
func (r *Redis) homeIn(views [][]clusterNode, key string) (*lockservice.Member, error) {
	slot := redisopt.KeySlot(key)
	addr, ok := slotOwner(views, slot)
	if !ok {
		return nil, fmt.Errorf("redis cluster: no primary serves slot %d (%s)", slot, key)
	}
	if i := slices.IndexFunc(r.Instances, func(in *lockservice.Member) bool { return in.ClientAddr() == addr }); i >= 0 {
		return r.Instances[i], nil
	}
	return nil, fmt.Errorf("redis cluster: slot %d (%s) is served by %s, none of the run's instances", slot, key, addr)
}

// SetLockKey tells the service the run's lock key: on the cluster topology its
// Leader is the primary that serves that key's slot.
func (r *Redis) SetLockKey(key string) { r.lockKey.Store(&key) }

// RedisCluster reports whether the instances are a Redis Cluster: the workers'
// init says so (redis_cluster), and their clients follow its slots.
func (r *Redis) RedisCluster() bool { return r.cfg.Topology == RedisCluster }

// clusterLeader is the instance that serves the run's lock key (SetLockKey);
// false before the run names it, or when no instance says who serves it.
func (r *Redis) clusterLeader(ctx context.Context) (int, bool) {
	key := r.lockKey.Load()
	if key == nil {
		return 0, false
	}
	in, err := r.home(ctx, *key)
	if err != nil {
		return 0, false
	}
	return in.ID, true
}

// formCluster makes the instances, each up but alone, one cluster: each gets its
// own configuration epoch (its number, as redis-cli --cluster create gives
// distinct ones), instance 1 meets every other, the primaries take their slots
// (primaryRanges), and once every instance knows every other, each replica
// replicates its primary (replicaOf). WaitClusterFormed says when it is whole.
func (r *Redis) formCluster(ctx context.Context) error {
	n := len(r.Instances)
	ids := make([]string, n)
	for i, in := range r.Instances {
		out, err := r.call(ctx, in, []string{"CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(in.ID)}, []string{"CLUSTER", "MYID"})
		if err == nil {
			if _, err = replyString(out[0]); err == nil {
				ids[i], err = replyString(out[1])
			}
		}
		if err != nil {
			return fmt.Errorf("redis cluster: instance %d: CLUSTER SET-CONFIG-EPOCH, MYID: %w", in.ID, err)
		}
	}
	first := r.Instances[0]
	for _, in := range r.Instances[1:] {
		if _, err := r.do(ctx, first, "CLUSTER", "MEET", in.Host.Addr().String(), strconv.Itoa(redisPort)); err != nil {
			return fmt.Errorf("redis cluster: instance 1: CLUSTER MEET instance %d: %w", in.ID, err)
		}
	}
	for i, s := range primaryRanges(clusterPrimaries) {
		if _, err := r.do(ctx, r.Instances[i], "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(s.lo), strconv.Itoa(s.hi)); err != nil {
			return fmt.Errorf("redis cluster: instance %d: CLUSTER ADDSLOTSRANGE %d %d: %w", i+1, s.lo, s.hi, err)
		}
	}
	if err := r.waitInstances(ctx, r.cfg.StartTimeout, "redis cluster not formed", "not every instance knows every other",
		func(ctx context.Context, in *lockservice.Member) error { return r.knowsAll(ctx, in, ids) }); err != nil {
		return err
	}
	for _, in := range r.Instances {
		if p := replicaOf(in.ID, n); p > 0 {
			if _, err := r.do(ctx, in, "CLUSTER", "REPLICATE", ids[p-1]); err != nil {
				return fmt.Errorf("redis cluster: instance %d: CLUSTER REPLICATE instance %d (%s): %w", in.ID, p, ids[p-1], err)
			}
		}
	}
	return nil
}

// knowsAll is nil when instance in's CLUSTER NODES lists every one of ids, none
// still in its handshake.
func (r *Redis) knowsAll(ctx context.Context, in *lockservice.Member, ids []string) error {
	view, err := r.clusterView(ctx, in)
	if err != nil {
		return err
	}
	for i, id := range ids {
		j := slices.IndexFunc(view, func(n clusterNode) bool { return n.id == id })
		switch {
		case j < 0:
			return fmt.Errorf("does not know instance %d (%s) yet", i+1, id)
		case view[j].has("handshake") || view[j].has("noaddr"):
			return fmt.Errorf("still meeting instance %d (%s): %s", i+1, id, strings.Join(view[j].flags, ","))
		}
	}
	return nil
}

// clusterView is instance in's CLUSTER NODES.
func (r *Redis) clusterView(ctx context.Context, in *lockservice.Member) ([]clusterNode, error) {
	v, err := r.do(ctx, in, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES: %w", err)
	}
	text, err := replyString(v)
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES: %w", err)
	}
	return parseClusterNodes(text)
}

// clusterFormed is nil when instance in says the cluster is whole: its CLUSTER
// INFO says cluster_state:ok with every slot served and every instance known; in
// its view every replica replicates the primary replicaOf names and the primaries
// serve their slots; and, a replica itself, its link to its primary is up.
// Otherwise it says what it waits for.
func (r *Redis) clusterFormed(ctx context.Context, in *lockservice.Member) error {
	out, err := r.call(ctx, in, []string{"CLUSTER", "INFO"}, []string{"CLUSTER", "NODES"}, []string{"INFO", "replication"})
	if err != nil {
		return err
	}
	texts := make([]string, len(out))
	for i, v := range out {
		if texts[i], err = replyString(v); err != nil {
			return err
		}
	}
	info, repl := parseInfo(texts[0]), parseInfo(texts[2])
	n := len(r.Instances)
	switch {
	case info["cluster_state"] != "ok":
		return fmt.Errorf("cluster_state:%s", info["cluster_state"])
	case info["cluster_slots_ok"] != strconv.Itoa(redisopt.SlotCount):
		return fmt.Errorf("cluster_slots_ok:%s of %d", info["cluster_slots_ok"], redisopt.SlotCount)
	case info["cluster_known_nodes"] != strconv.Itoa(n):
		return fmt.Errorf("knows %s of the %d instances", info["cluster_known_nodes"], n)
	}
	view, err := parseClusterNodes(texts[1])
	if err != nil {
		return err
	}
	if err := r.formedView(view); err != nil {
		return err
	}
	if replicaOf(in.ID, n) > 0 && (repl["role"] != "slave" || repl["master_link_status"] != "up") {
		return fmt.Errorf("a replica whose link to its primary is not up yet (role:%s, master_link_status:%s)", repl["role"], repl["master_link_status"])
	}
	return nil
}

// formedView is nil when view (one instance's CLUSTER NODES) has every primary
// serving its range of slots and every replica replicating its primary.
func (r *Redis) formedView(view []clusterNode) error {
	byAddr := map[string]clusterNode{}
	for _, node := range view {
		byAddr[node.addr] = node
	}
	ranges := primaryRanges(clusterPrimaries)
	for _, in := range r.Instances {
		node, ok := byAddr[in.ClientAddr()]
		if !ok {
			return fmt.Errorf("does not list instance %d", in.ID)
		}
		p := replicaOf(in.ID, len(r.Instances))
		if p == 0 {
			if !node.has("master") || !slices.Equal(node.slots, ranges[in.ID-1:in.ID]) {
				return fmt.Errorf("lists instance %d as %s serving %v, want a primary serving %v", in.ID, strings.Join(node.flags, ","), node.slots, ranges[in.ID-1])
			}
			continue
		}
		if primary := byAddr[r.Instances[p-1].ClientAddr()]; !node.has("slave") || node.primary != primary.id {
			return fmt.Errorf("does not list instance %d as a replica of instance %d yet", in.ID, p)
		}
	}
	return nil
}

// WaitClusterFormed waits until every instance says the cluster is whole
// (clusterFormed). An instance that exited, or the timeout, is an error naming each
// instance that does not say so and what it waits for, with the tail of its log.
func (r *Redis) WaitClusterFormed(ctx context.Context, timeout time.Duration) error {
	return r.waitInstances(ctx, timeout, "redis cluster not formed", "not every instance says the cluster is whole", r.clusterFormed)
}

// servingInCluster is nil when instance in, whose INFO replication is repl, serves
// in the cluster: the cluster is ok in its eyes and, a replica, it is linked to its
// primary (which may be another instance than its files name after a failover).
func (r *Redis) servingInCluster(ctx context.Context, in *lockservice.Member, repl map[string]string) error {
	v, err := r.do(ctx, in, "CLUSTER", "INFO")
	if err != nil {
		return fmt.Errorf("CLUSTER INFO: %w", err)
	}
	text, err := replyString(v)
	if err != nil {
		return fmt.Errorf("CLUSTER INFO: %w", err)
	}
	if state := parseInfo(text)["cluster_state"]; state != "ok" {
		return fmt.Errorf("cluster_state:%s", state)
	}
	if repl["role"] == "slave" && repl["master_link_status"] != "up" {
		return fmt.Errorf("replica of %s:%s: link %s", repl["master_host"], repl["master_port"], repl["master_link_status"])
	}
	return nil
}
