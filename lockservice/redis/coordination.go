package redis

import "github.com/zlockcheck/zlockcheck/nemesis"

var _ nemesis.Coordinated = (*Redis)(nil)

// clusterBusPort is a Redis Cluster instance's bus port: its port plus 10000, as
// Redis has it (the instances gossip, find each other failing and vote there).
const clusterBusPort = redisPort + 10000

// CoordinationPorts are the ports over which the servers watch each other and elect
// (nemesis.Coordinated): the sentinels' port on the sentinel topology (the sentinels
// run beside the instances, in their namespaces), the cluster bus on the cluster
// topology; none on the others, whose instances elect nothing.
func (r *Redis) CoordinationPorts() []uint16 {
	return coordinationPorts(r.cfg.Topology)
}

// coordinationPorts are topology's coordination ports (nil: none).
func coordinationPorts(t RedisTopology) []uint16 {
	switch t {
	case RedisSentinel:
		return []uint16{sentinelPort}
	case RedisCluster:
		return []uint16{clusterBusPort}
	}
	return nil
}
