package redis

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// RedisTopology is how a run's Redis instances relate to each other.
type RedisTopology string

// The Redis topologies.
const (
	// RedisSingle is one instance.
	RedisSingle RedisTopology = "single"
	// RedisReplicas is instance 1 a primary, every other one its replica
	// (replicaof); nothing promotes a replica by itself.
	RedisReplicas RedisTopology = "replicas"
	// RedisRedlock is N independent primaries, for RedLock (3 or 5 are usual).
	RedisRedlock RedisTopology = "redlock"
	// RedisSentinel is instance 1 a primary and the others its replicas, with a
	// redis-sentinel beside each instance (in its namespace) that watches the
	// primary and promotes a replica when a majority of them find it down.
	RedisSentinel RedisTopology = "sentinel"
	// RedisCluster is a Redis Cluster: 3 primaries, each serving a third of the
	// hash slots, and with 6 instances a replica of each, which the cluster
	// promotes by itself when its primary is out of reach for the node timeout.
	RedisCluster RedisTopology = "cluster"
)

// RedisPersistence is what a Redis instance writes to disk.
type RedisPersistence string

// The persistence settings.
const (
	// PersistNone writes nothing (save "", appendonly no): a restarted instance has
	// forgotten every key.
	PersistNone RedisPersistence = "none"
	// PersistAOFEverysec appends every write to the AOF and fsyncs it once a second
	// (Redis's default when AOF is on): a crash loses up to about a second.
	PersistAOFEverysec RedisPersistence = "aof-everysec"
	// PersistAOFAlways fsyncs the AOF before each write is acknowledged.
	PersistAOFAlways RedisPersistence = "aof-always"
)

// RedisSettings are a run's choices about its Redis instances, as config.json records
// them (the zero value: a single instance without persistence, WithDefaults).
type RedisSettings struct {
	Topology RedisTopology `json:"topology,omitempty"`
	// Persistence is the instances' ("" on an existing Redis: its owners').
	Persistence RedisPersistence `json:"persistence,omitempty"`
	// Sentinel is the sentinels' settings (the sentinel topology only).
	Sentinel SentinelSettings `json:"sentinel,omitzero"`
	// Guard is the primaries' replication guard (topologies with replicas).
	Guard ReplicationGuard `json:"guard,omitzero"`
	// Cluster is the cluster topology's settings (that topology only).
	Cluster ClusterSettings `json:"cluster,omitzero"`
}

// ParseRedisTopology reads a topology: single, replicas, redlock, sentinel or
// cluster.
func ParseRedisTopology(s string) (RedisTopology, error) {
	switch t := RedisTopology(s); t {
	case RedisSingle, RedisReplicas, RedisRedlock, RedisSentinel, RedisCluster:
		return t, nil
	}
	return "", fmt.Errorf("want single, replicas, redlock, sentinel or cluster, got %q", s)
}

// FailsOverItself reports whether the servers fail over on their own, with no
// fault of the run's: the sentinels promote a replica when the primary is down or
// cut off from them, a Redis Cluster's replica promotes itself when its primary is
// out of reach for the node timeout (explore aims a probe at it).
func (s RedisSettings) FailsOverItself() bool {
	return s.Topology == RedisSentinel || s.Topology == RedisCluster
}

// replicated reports whether instance 1 is a primary and the others its replicas.
func (t RedisTopology) replicated() bool { return t == RedisReplicas || t == RedisSentinel }

// ParseRedisPersistence reads a persistence setting: none, aof-everysec or aof-always.
func ParseRedisPersistence(s string) (RedisPersistence, error) {
	switch p := RedisPersistence(s); p {
	case PersistNone, PersistAOFEverysec, PersistAOFAlways:
		return p, nil
	}
	return "", fmt.Errorf("want none, aof-everysec or aof-always, got %q", s)
}

// WithDefaults fills the unset settings: a single instance, no persistence.
func (s RedisSettings) WithDefaults() RedisSettings {
	if s.Topology == "" {
		s.Topology = RedisSingle
	}
	if s.Persistence == "" {
		s.Persistence = PersistNone
	}
	s.Guard = s.Guard.withDefaults()
	switch s.Topology {
	case RedisSentinel:
		s.Sentinel = s.Sentinel.withDefaults()
	case RedisCluster:
		s.Cluster = s.Cluster.withDefaults()
	}
	return s
}

// DefaultNodes is the number of instances a topology has when the run names none:
// one for single, six for cluster (3 primaries and a replica of each), three
// otherwise.
func (s RedisSettings) DefaultNodes() int {
	switch s.WithDefaults().Topology {
	case RedisSingle:
		return 1
	case RedisCluster:
		return 2 * clusterPrimaries
	}
	return 3
}

// validateNodes reports settings that cannot run with nodes instances, naming the
// setting.
func (s RedisSettings) validateNodes(nodes int) error {
	s = s.WithDefaults()
	if _, err := ParseRedisTopology(string(s.Topology)); err != nil {
		return fmt.Errorf("redis-topology: %w", err)
	}
	if _, err := ParseRedisPersistence(string(s.Persistence)); err != nil {
		return fmt.Errorf("redis-persistence: %w", err)
	}
	switch {
	case nodes < 1 || nodes > 9:
		return fmt.Errorf("nodes: want 1 to 9 Redis instances, got %d", nodes)
	case s.Topology == RedisSingle && nodes != 1:
		return fmt.Errorf("nodes: the single topology is one instance, got --nodes %d (use --redis-topology redlock or replicas for more)", nodes)
	case s.Topology == RedisRedlock && nodes < 3:
		return fmt.Errorf("nodes: RedLock wants at least 3 independent instances (3 or 5 are usual), got %d", nodes)
	case s.Topology == RedisReplicas && nodes < 2:
		return fmt.Errorf("nodes: a primary with replicas wants at least 2 instances, got %d (one is --redis-topology single)", nodes)
	case s.Topology == RedisSentinel && nodes < 3:
		return fmt.Errorf("nodes: the sentinel topology wants at least 3 instances, each with its sentinel (a majority of sentinels must outlive one), got %d", nodes)
	case s.Topology != RedisSentinel && s.Sentinel != (SentinelSettings{}):
		return fmt.Errorf("redis-down-after, redis-failover-timeout: sentinel settings, for --redis-topology sentinel, not %s", s.Topology)
	case s.Topology != RedisCluster && s.Cluster != (ClusterSettings{}):
		return fmt.Errorf("redis-cluster-node-timeout: a cluster setting, for --redis-topology cluster, not %s", s.Topology)
	case s.Topology == RedisCluster:
		if err := clusterNodes(nodes); err != nil {
			return err
		}
	}
	return errors.Join(s.Sentinel.validate(), s.Cluster.validate(), s.Guard.validate(), s.Guard.fits(s.Topology, nodes))
}

// RedisConfig says how to run a set of Redis instances.
type RedisConfig struct {
	RedisSettings
	// Nodes is the number of instances (0: the topology's DefaultNodes).
	Nodes int
	// Dir is where each instance's files go (Dir/s1, Dir/s2, ...).
	Dir string
	// Binary is the redis-server to run; empty means "redis-server" on the PATH
	// (Debian's, in redis-tools).
	Binary string
	// SentinelBinary is the redis-sentinel of the sentinel topology; empty means
	// "redis-sentinel" on the PATH (Debian's, in redis-sentinel).
	SentinelBinary string
	// StartTimeout bounds the wait until every instance serves (replicas linked),
	// and then the wait until the sentinels agree, or each of the waits while the
	// tool forms the cluster.
	StartTimeout time.Duration
}

// redisPort is every instance's port (each has its own address).
const redisPort = 6379

// redisMarker opens every redis.conf the tool writes: cleanup kills only a
// redis-server whose configuration starts with it.
const redisMarker = "# written by zlockcheck"

func (c *RedisConfig) defaults() {
	c.RedisSettings = c.RedisSettings.WithDefaults()
	if c.Nodes == 0 {
		c.Nodes = c.DefaultNodes()
	}
	if c.Binary == "" {
		c.Binary = "redis-server"
	}
	if c.SentinelBinary == "" {
		c.SentinelBinary = "redis-sentinel"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 20 * time.Second
	}
}

// redisFiles are where one instance's files go; Nodes is the cluster topology's
// cluster-config-file (its state, which Redis writes).
type redisFiles struct {
	Conf, Log, Pid, Data, Nodes string
}

// redisConf is the redis.conf of instance id listening on addr with its files at f;
// primary is the address of the instance it replicates (invalid: none). The one place
// an instance's configuration is written.
func redisConf(s RedisSettings, id int, addr netip.Addr, f redisFiles, primary netip.Addr) []byte {
	s = s.WithDefaults()
	lines := []string{
		fmt.Sprintf("%s: Redis instance %d of a %s topology, persistence %s", redisMarker, id, s.Topology, s.Persistence),
		"port " + strconv.Itoa(redisPort),
		"bind " + addr.String(),
		"protected-mode no",
		"daemonize no",
		"supervised no",
		"dir " + quoteConf(f.Data),
		"logfile " + quoteConf(f.Log),
		"pidfile " + quoteConf(f.Pid),
		`save ""`,
		"always-show-logo no",
		// The configuration's path on the command line: cleanup finds the instance by it.
		`proc-title-template "{title} {listen-addr} {server-mode} {config-file}"`,
		// A primary starts a replica's full sync at once, not after waiting 5 s for
		// more replicas (they start together anyway).
		"repl-diskless-sync-delay 0",
	}
	switch s.Persistence {
	case PersistAOFEverysec:
		lines = append(lines, "appendonly yes", "appendfsync everysec")
	case PersistAOFAlways:
		lines = append(lines, "appendonly yes", "appendfsync always")
	default:
		lines = append(lines, "appendonly no")
	}
	if primary.IsValid() {
		lines = append(lines, fmt.Sprintf("replicaof %s %d", primary, redisPort))
	}
	if s.Topology == RedisCluster {
		lines = append(lines, clusterLines(s.Cluster, f.Nodes)...)
	}
	// Every instance: a replica promoted later keeps the guard.
	lines = append(lines, s.Guard.conf()...)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// quoteConf quotes a path for redis.conf.
func quoteConf(s string) string { return strconv.Quote(s) }
