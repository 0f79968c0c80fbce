package redis

import (
	"encoding/json"
	"testing"
	"time"
)

// TestGuardReadsOldConfigs: config.json keeps the guard in its own section, and one
// written while the guard was a sentinel setting (its fields under "sentinel") still
// reads as guarded; the new section wins when both are there.
func TestGuardReadsOldConfigs(t *testing.T) {
	for _, c := range []struct {
		name, json string
		want       ReplicationGuard
	}{
		{"new", `{"topology":"cluster","guard":{"min_replicas_to_write":1,"min_replicas_max_lag_ns":2000000000}}`, ReplicationGuard{1, 2 * time.Second}},
		{"old", `{"topology":"sentinel","sentinel":{"down_after_ns":1000000000,"min_replicas_to_write":1}}`, ReplicationGuard{MinReplicasToWrite: 1}},
		{"both", `{"sentinel":{"min_replicas_to_write":2},"guard":{"min_replicas_to_write":1}}`, ReplicationGuard{MinReplicasToWrite: 1}},
		{"none", `{"topology":"single"}`, ReplicationGuard{}},
	} {
		var s RedisSettings
		if err := json.Unmarshal([]byte(c.json), &s); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Guard != c.want {
			t.Errorf("%s: guard %+v, want %+v", c.name, s.Guard, c.want)
		}
		if c.name == "old" && s.Sentinel.DownAfter != time.Second {
			t.Errorf("old: the sentinel settings were lost: %+v", s.Sentinel)
		}
	}
	var s RedisSettings
	if err := json.Unmarshal([]byte(`{"sentinel":{"zlc_nonsense":1}}`), &s); err == nil {
		t.Error("an unknown field of the sentinel section was accepted")
	}
	out, err := json.Marshal(RedisSettings{Topology: RedisCluster, Guard: ReplicationGuard{MinReplicasToWrite: 1}})
	if err != nil || string(out) != `{"topology":"cluster","guard":{"min_replicas_to_write":1}}` {
		t.Errorf("marshal: %s, %v", out, err)
	}
}
