package redis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// ReplicationGuard is min-replicas-to-write and min-replicas-max-lag on every
// instance a run starts (a replica promoted later keeps them): a primary refuses
// writes unless that many replicas acknowledged its stream within the lag. It bounds
// what a primary cut off from its replicas can still grant, and so what a failover
// loses; it needs replicas (the replicas and sentinel topologies, a cluster of 6).
type ReplicationGuard struct {
	// MinReplicasToWrite, when above 0, is how many replicas must have answered
	// (min-replicas-to-write).
	MinReplicasToWrite int `json:"min_replicas_to_write,omitempty"`
	// MinReplicasMaxLag is how old their last acknowledgement may be, in whole
	// seconds (min-replicas-max-lag).
	MinReplicasMaxLag time.Duration `json:"min_replicas_max_lag_ns,omitempty"`
}

// defaultMinReplicasLag is the guard's lag unless set: Redis's own default.
const defaultMinReplicasLag = 10 * time.Second

// on reports whether the guard is set.
func (g ReplicationGuard) on() bool { return g.MinReplicasToWrite > 0 }

// withDefaults fills the lag of a guard that is on.
func (g ReplicationGuard) withDefaults() ReplicationGuard {
	if g.on() && g.MinReplicasMaxLag == 0 {
		g.MinReplicasMaxLag = defaultMinReplicasLag
	}
	return g
}

// validate names the flag whose value cannot be.
func (g ReplicationGuard) validate() error {
	switch {
	case g.MinReplicasToWrite < 0:
		return fmt.Errorf("redis-min-replicas-to-write: want 0 or more replicas, got %d", g.MinReplicasToWrite)
	case g.MinReplicasMaxLag != 0 && (g.MinReplicasMaxLag < time.Second || g.MinReplicasMaxLag%time.Second != 0):
		return fmt.Errorf("redis-min-replicas-max-lag: want whole seconds, at least 1s, got %s", g.MinReplicasMaxLag)
	case g.MinReplicasMaxLag != 0 && !g.on():
		return fmt.Errorf("redis-min-replicas-max-lag: needs --redis-min-replicas-to-write")
	}
	return nil
}

// fits refuses the guard where no primary has as many replicas as it asks for
// (every write would be refused): on topology with nodes instances.
func (g ReplicationGuard) fits(topology RedisTopology, nodes int) error {
	if !g.on() {
		return nil
	}
	if replicas := replicasPerPrimary(topology, nodes); g.MinReplicasToWrite > replicas {
		return fmt.Errorf("redis-min-replicas-to-write: %d replicas asked for, but a primary of the %s topology of %d has %d (every write would be refused)", g.MinReplicasToWrite, topology, nodes, replicas)
	}
	return nil
}

// replicasPerPrimary is how many replicas each primary of topology has with nodes
// instances: none on one instance or RedLock's independent ones.
func replicasPerPrimary(topology RedisTopology, nodes int) int {
	switch topology {
	case RedisReplicas, RedisSentinel:
		return nodes - 1
	case RedisCluster:
		return nodes/clusterPrimaries - 1
	}
	return 0
}

// conf is the guard's lines of redis.conf, none when it is off.
func (g ReplicationGuard) conf() []string {
	if !g.on() {
		return nil
	}
	g = g.withDefaults()
	return []string{fmt.Sprintf("min-replicas-to-write %d", g.MinReplicasToWrite),
		fmt.Sprintf("min-replicas-max-lag %d", int(g.MinReplicasMaxLag/time.Second))}
}

// UnmarshalJSON reads RedisSettings, refusing a field they do not have, and the
// guard of a config.json written while it was a sentinel setting (its fields in the
// "sentinel" section).
func (s *RedisSettings) UnmarshalJSON(b []byte) error {
	type plain RedisSettings
	var wire struct {
		plain
		Sentinel struct {
			SentinelSettings
			ReplicationGuard
		} `json:"sentinel"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wire); err != nil {
		return err
	}
	*s = RedisSettings(wire.plain)
	s.Sentinel = wire.Sentinel.SentinelSettings
	if !s.Guard.on() {
		s.Guard = wire.Sentinel.ReplicationGuard
	}
	return nil
}
