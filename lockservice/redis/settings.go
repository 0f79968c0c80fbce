package redis

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

var (
	_ lockservice.Settings   = RedisSettings{}
	_ lockservice.Deployer   = RedisSettings{}
	_ lockservice.Deployment = RedisSettings{}
)

func init() {
	lockservice.RegisterSettings(lockservice.SettingsSpec{
		Kinds: []kind.Name{kind.Redis}, Title: "Redis settings", Zero: RedisSettings{},
		Flags: flags, Legacy: legacy,
	})
}

// flags defines the Redis settings' flags on fs.
func flags(fs *flag.FlagSet) func() (lockservice.Settings, error) {
	topology := fs.String("redis-topology", "", "with --service redis: single (one instance; the default), replicas (instance 1 a primary, the others its replicas), redlock (--nodes independent primaries), sentinel (replicas with a redis-sentinel beside each instance, which promote a replica themselves; go-redis recipes follow: docs/redis.md) or cluster (a Redis Cluster of 3 primaries, with --nodes 6 (the default) a replica of each, which the cluster promotes itself; redis-lock and redislock follow its slots: docs/redis.md)")
	persistence := fs.String("redis-persistence", "", "with --service redis: none (the default), aof-everysec or aof-always; recorded in config.json")
	var g SentinelSettings
	fs.DurationVar(&g.DownAfter, "redis-down-after", 0, "with --redis-topology sentinel: how long a sentinel waits for the primary before it finds it down (down-after-milliseconds; 0: 1s)")
	fs.DurationVar(&g.FailoverTimeout, "redis-failover-timeout", 0, "with --redis-topology sentinel: the sentinels' failover-timeout (0: 5s)")
	var guard ReplicationGuard
	fs.IntVar(&guard.MinReplicasToWrite, "redis-min-replicas-to-write", 0, "with --redis-topology replicas, sentinel or cluster (of 6): every primary refuses writes unless this many replicas answered within --redis-min-replicas-max-lag (0: no such guard)")
	fs.DurationVar(&guard.MinReplicasMaxLag, "redis-min-replicas-max-lag", 0, "with --redis-min-replicas-to-write: the replicas' largest lag, whole seconds (0: 10s)")
	var c ClusterSettings
	fs.DurationVar(&c.NodeTimeout, "redis-cluster-node-timeout", 0, "with --redis-topology cluster: how long a primary may be out of reach before the cluster promotes its replica (cluster-node-timeout; 0: 1s)")
	return func() (lockservice.Settings, error) {
		s := RedisSettings{Sentinel: g, Cluster: c, Guard: guard}
		var err error
		if *topology != "" {
			if s.Topology, err = ParseRedisTopology(*topology); err != nil {
				return nil, fmt.Errorf("--redis-topology: %w", err)
			}
		}
		if *persistence != "" {
			if s.Persistence, err = ParseRedisPersistence(*persistence); err != nil {
				return nil, fmt.Errorf("--redis-persistence: %w", err)
			}
		}
		return s, nil
	}
}

// legacy reads the settings from a config.json written before they had a section:
// its "redis" key.
func legacy(flat map[string]json.RawMessage) (lockservice.Settings, error) {
	var s RedisSettings
	if raw, ok := flat["redis"]; ok {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	return s, nil
}

// Defaults fills the topology (RedLock's recipes, and a RedLock over keys of one
// cluster, run on the one topology they can use) and persistence, and the number
// of instances the topology has.
func (s RedisSettings) Defaults(p lockservice.Plan) (lockservice.Settings, lockservice.Plan) {
	switch {
	case s.Topology == "" && p.RedLock:
		s.Topology = RedisRedlock
	case s.Topology == "" && p.ClusterOnly:
		s.Topology = RedisCluster
	}
	if p.Connect == "" {
		s = s.WithDefaults()
	} else if s.Topology == "" {
		s.Topology = RedisSingle // an existing Redis's persistence is its owners': none is named
	}
	if p.Connect != "" && p.Nodes == 0 {
		if addrs, err := lockservice.ParseHostPorts(p.Connect, DefaultConnectPort); err == nil {
			p.Nodes = len(addrs) // Validate says what is wrong with them, if anything
		}
	}
	if p.SSH != nil {
		p.Nodes = len(p.SSH.Nodes) // one instance a node
	}
	if p.Nodes == 0 {
		p.Nodes = s.DefaultNodes()
	}
	return s, p
}

// Validate refuses what a run on Redis cannot do (yet), and a recipe of the
// catalogue on a topology it cannot use.
func (s RedisSettings) Validate(p lockservice.Plan) error {
	if err := validateConnect(s, p); err != nil {
		return err
	}
	switch {
	case p.Fenced && p.RedLock:
		return fmt.Errorf("fenced: recipe %s has no fencing token (RedLock gives none)", p.Recipe)
	}
	if err := s.validateNodes(p.Nodes); err != nil {
		return err
	}
	if err := s.fits(p); err != nil {
		return err
	}
	if p.Processes {
		return errors.New("baseline-processes: there is no plain Redis client loop as processes yet (--baseline runs it as goroutines)")
	}
	topology := s.WithDefaults().Topology
	switch topology {
	case RedisSentinel:
		if err := sentinelFits(p); err != nil {
			return err
		}
	case RedisCluster:
		if err := clusterFits(p); err != nil {
			return err
		}
	}
	for _, cl := range p.Faults {
		if cl == nemesis.ClassFailover && topology != RedisReplicas {
			return fmt.Errorf("nemesis failover: promotes a replica: it needs --redis-topology replicas, not %s", topology)
		}
		if cl == nemesis.ClassCoordinationPartition && coordinationPorts(topology) == nil {
			return fmt.Errorf("nemesis coordination-partition: cuts the sentinels or a cluster's bus apart: it needs --redis-topology sentinel or cluster, not %s", topology)
		}
	}
	return nil
}

// validateConnect checks an existing Redis's addresses (--connect): one instance a
// --nodes, and no persistence asked for (its owners chose it).
func validateConnect(s RedisSettings, p lockservice.Plan) error {
	if p.Connect == "" {
		return nil
	}
	addrs, err := lockservice.ParseHostPorts(p.Connect, DefaultConnectPort)
	switch {
	case err != nil:
		return err
	case p.Nodes != len(addrs):
		return fmt.Errorf("nodes: --connect names %d Redis instances, --nodes says %d", len(addrs), p.Nodes)
	case s.Persistence != "":
		return errors.New("redis-persistence: an existing Redis (connect) keeps the persistence its owners gave it; --redis-persistence is for the instances zlockcheck starts")
	case s.Guard.on():
		return errors.New("redis-min-replicas-to-write: an existing Redis (connect) keeps the settings its owners gave it; the guard is for the instances zlockcheck starts")
	}
	return nil
}

// fits refuses a recipe of the catalogue on a topology it cannot use: RedLock needs
// independent instances (or, with a Sentinel or Cluster mode, the sentinels' one
// primary or the cluster client); a single-instance lock uses one primary.
func (s RedisSettings) fits(p lockservice.Plan) error {
	if !p.Catalogued {
		return nil
	}
	topology := s.WithDefaults().Topology
	redlock := topology == RedisRedlock
	switch {
	case p.ClusterOnly && topology != RedisCluster:
		return fmt.Errorf("recipe %s is RedLock over keys of one Redis Cluster (a misuse, docs/redis.md): run it with --redis-topology cluster, not %s", p.Recipe, topology)
	case p.Replicas && topology == RedisCluster && replicasPerPrimary(topology, p.Nodes) == 0:
		return fmt.Errorf("recipe %s waits for a replica after each grant: a cluster of %d primaries has none; run it with --nodes %d (a replica of each)", p.Recipe, clusterPrimaries, 2*clusterPrimaries)
	case p.Replicas && replicasPerPrimary(topology, p.Nodes) == 0:
		return fmt.Errorf("recipe %s waits for a replica after each grant: run it with --redis-topology replicas, sentinel or cluster, not %s", p.Recipe, topology)
	case p.RedLock && p.Sentinel && topology == RedisSentinel:
		return nil // one pool, on the primary the sentinels name
	case p.RedLock && p.Cluster && topology == RedisCluster:
		return nil // one pool, on the cluster client
	case p.RedLock && topology == RedisCluster:
		return fmt.Errorf("recipe %s is RedLock over independent instances, with no Redis Cluster mode here: run it with --redis-topology redlock --nodes 3 (or 5)", p.Recipe)
	case p.RedLock && !redlock:
		return fmt.Errorf("recipe %s is RedLock over independent instances: run it with --redis-topology redlock --nodes 3 (or 5)", p.Recipe)
	case !p.RedLock && redlock:
		return fmt.Errorf("recipe %s locks one Redis primary: run it with --redis-topology single or replicas, not redlock", p.Recipe)
	}
	return nil
}

// Server is the instances' configuration for the run (start).
func (s RedisSettings) Server(p lockservice.Plan, dir string) any {
	return RedisConfig{RedisSettings: s, Nodes: p.Nodes, Dir: dir}
}

// Describe names the instances in the run's log.
func (s RedisSettings) Describe(p lockservice.Plan, version string) string {
	if p.Connect != "" {
		return fmt.Sprintf("existing redis %s, %s topology of %d (not managed by zlockcheck):", version, s.Topology, p.Nodes)
	}
	return fmt.Sprintf("redis %s, %s topology of %d, persistence %s:", version, s.Topology, p.Nodes, s.Persistence)
}

// Brief names the instances in a run's description.
func (s RedisSettings) Brief(p lockservice.Plan) string {
	r := s.WithDefaults()
	if p.Connect != "" {
		return fmt.Sprintf("service redis (an existing %s topology of %d)", r.Topology, p.Nodes)
	}
	return fmt.Sprintf("service redis (%s topology of %d, persistence %s)", r.Topology, p.Nodes, r.Persistence)
}

// Deployments are the topologies a run of p may take when the settings name none,
// in the order a matrix tries them: single, replicas, redlock; a cluster for a
// recipe that runs on nothing else.
func (s RedisSettings) Deployments(p lockservice.Plan) []lockservice.Settings {
	if s.Topology != "" {
		return nil
	}
	topologies := []RedisTopology{RedisSingle, RedisReplicas, RedisRedlock}
	if p.ClusterOnly {
		topologies = []RedisTopology{RedisCluster}
	}
	var out []lockservice.Settings
	for _, t := range topologies {
		d := s
		d.Topology = t
		out = append(out, d)
	}
	return out
}

// Deployment names the topology ("" when unset).
func (s RedisSettings) Deployment() string { return string(s.Topology) }
