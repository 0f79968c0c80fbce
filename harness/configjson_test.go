package harness

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
)

// TestConfigJSONBothShapes: config.json keeps a kind's settings in its "settings"
// section; a config.json written before the section (the same settings at the top
// level) reads into the same Config; a field nobody has, both shapes at once, or a
// section of the wrong type is an error naming it.
func TestConfigJSONBothShapes(t *testing.T) {
	zk := zookeeper.Settings{Observers: 2, Tick: 200 * time.Millisecond, InitLimit: 50, SyncLimit: 10, Heap: "1g"}
	cases := []struct {
		name, json string
		want       lockservice.Settings
	}{
		{"zookeeper, flat", `{"service":"zookeeper","observers":2,"tick_ns":200000000,"init_limit":50,"sync_limit":10,"server_heap":"1g"}`, zk},
		{"zookeeper, section", `{"service":"zookeeper","settings":{"observers":2,"tick_ns":200000000,"init_limit":50,"sync_limit":10,"server_heap":"1g"}}`, zk},
		{"redis, flat", `{"service":"redis","tick_ns":2000000000,"init_limit":10,"sync_limit":5,"redis":{"topology":"redlock","persistence":"none"}}`,
			redis.RedisSettings{Topology: redis.RedisRedlock, Persistence: redis.PersistNone}},
		{"redis, section", `{"service":"redis","settings":{"topology":"replicas"}}`, redis.RedisSettings{Topology: redis.RedisReplicas}},
		{"postgres, flat", `{"service":"postgres","tick_ns":2000000000,"db_keepalive_ns":5000000000}`, sqldb.Settings{KeepAlive: 5 * time.Second}},
		{"mariadb, section", `{"service":"mariadb","settings":{"keepalive_ns":5000000000}}`, sqldb.Settings{KeepAlive: 5 * time.Second}},
		{"no settings", `{"service":"redis","recipe":"redis-lock"}`, nil},
	}
	for _, c := range cases {
		var got Config
		if err := json.Unmarshal([]byte(c.json), &got); err != nil || got.Settings != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got.Settings, err, c.want)
		}
	}
	for in, want := range map[string]string{
		`{"service":"zookeeper","nonsense":1}`:                           `unknown field "nonsense"`,
		`{"service":"zookeeper","settings":{"topology":"single"}}`:       `unknown field "topology"`,
		`{"service":"zookeeper","tick_ns":1,"settings":{"tick_ns":1}}`:   "both as a section and at the top level",
		`{"service":"redis","settings":{"topology":1}}`:                  "settings of Redis",
		`{"service":"zookeeper","tick_ns":"soon"}`:                       "tick_ns",
		`{"service":"zookeeper","settings":{"tick_ns":1},"workers":"x"}`: "workers",
	} {
		var c Config
		if err := json.Unmarshal([]byte(in), &c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}
}

// TestConfigJSONRoundTrip: every kind's run, with its defaults, reads back from
// its config.json as it was written.
func TestConfigJSONRoundTrip(t *testing.T) {
	for _, recipe := range []string{"gozk", "redis-lock", "redsync", "pg-table", "mariadb-getlock"} {
		c := Config{Recipe: recipe, WorkerArgv: []string{"w"}}.Defaults()
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		if err := json.Unmarshal(data, &back); err != nil || back.Settings != c.Settings || back.Service != c.Service || back.Nodes != c.Nodes {
			t.Errorf("%s: %s read back as %+v (%v)", recipe, data, back, err)
		}
	}
}
