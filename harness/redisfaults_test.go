package harness

import (
	"slices"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// TestValidateRedisFaults: the Redis classes run on Redis (failover on the replicas
// topology only, coordination-partition on sentinel and cluster only); failover,
// clock-jump, connection-kill and coordination-partition are refused on ZooKeeper,
// restart is not; compaction (etcd's) is refused on both.
func TestValidateRedisFaults(t *testing.T) {
	c := redisConfig()
	c.Nemesis = slices.DeleteFunc(nemesis.NamedClasses(), func(cl nemesis.Class) bool {
		return cl == nemesis.ClassCompaction || cl == nemesis.ClassCoordinationPartition
	})
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "--redis-topology replicas") {
		t.Errorf("failover on a single instance: %v", err)
	}
	c.Settings, c.Nodes = redis.RedisSettings{Topology: redis.RedisReplicas}, 3
	if err := c.Defaults().Validate(); err != nil {
		t.Errorf("the Redis classes on replicas: %v", err)
	}
	for _, cl := range nemesis.NamedClasses() {
		zk := Config{Recipe: "exec", WorkerArgv: []string{"w"}, Nemesis: []nemesis.Class{cl}}
		err := zk.Defaults().Validate()
		redisOnly := cl == nemesis.ClassFailover || cl == nemesis.ClassClockJump || cl == nemesis.ClassConnectionKill ||
			cl == nemesis.ClassCompaction || cl == nemesis.ClassCoordinationPartition
		if refused := err != nil && strings.Contains(err.Error(), "ZooKeeper cannot"); refused != redisOnly {
			t.Errorf("%s on ZooKeeper: %v", cl, err)
		}
	}
	c.Nemesis = []nemesis.Class{nemesis.ClassCompaction}
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "Redis cannot") {
		t.Errorf("compaction on Redis: %v", err)
	}
	c.Nemesis = []nemesis.Class{nemesis.ClassCoordinationPartition}
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "sentinel or cluster, not replicas") {
		t.Errorf("coordination-partition on replicas: %v", err)
	}
	c.Settings = redis.RedisSettings{Topology: redis.RedisSentinel}
	if err := c.Defaults().Validate(); err != nil {
		t.Errorf("coordination-partition on sentinel: %v", err)
	}
}
