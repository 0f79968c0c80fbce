package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
)

// parseKindFlags registers every kind's flags on a fresh set and parses args.
func parseKindFlags(t *testing.T, args ...string) (kindFlags, map[string]bool) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var k kindFlags
	k.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return k, set
}

// TestKindFlags: a run of one kind gets that kind's settings from its flags (their
// defaults when none is given); another kind's flag is refused by name, with the
// --service that takes it; a matrix gets the settings of every kind whose flags were
// given.
func TestKindFlags(t *testing.T) {
	k, set := parseKindFlags(t, "--redis-topology", "replicas")
	got, err := k.forKind(kind.Redis, set)
	if err != nil || got != (redis.RedisSettings{Topology: redis.RedisReplicas}) {
		t.Errorf("redis: %+v, %v", got, err)
	}
	if _, err := k.forKind(kind.ZooKeeper, set); err == nil || !strings.Contains(err.Error(), "--redis-topology: Redis settings for the ZooKeeper service: add --service redis") {
		t.Errorf("redis flags on zookeeper: %v", err)
	}
	k, set = parseKindFlags(t, "--redis-topology", "replicas", "--db-keepalive", "5s")
	if _, err := k.forKind(kind.Redis, set); err == nil || !strings.Contains(err.Error(), "--db-keepalive: database settings for the Redis service: add --service postgres or mariadb") {
		t.Errorf("the databases' flag on Redis: %v", err)
	}
	given, err := k.given(set)
	want := []lockservice.Settings{redis.RedisSettings{Topology: redis.RedisReplicas}, sqldb.Settings{KeepAlive: 5 * time.Second}}
	if err != nil || len(given) != 2 || given[0] != want[0] || given[1] != want[1] {
		t.Errorf("given %+v (%v), want %+v", given, err, want)
	}

	k, set = parseKindFlags(t)
	if got, err := k.forKind(kind.ZooKeeper, set); err != nil || got != zookeeper.DefaultSettings() {
		t.Errorf("zookeeper with no flags: %+v, %v", got, err)
	}
	if given, _ := k.given(set); len(given) != 0 {
		t.Errorf("no flags given, but settings %+v", given)
	}
	k, set = parseKindFlags(t, "--redis-topology", "galaxy")
	if _, err := k.forKind(kind.Redis, set); err == nil || !strings.Contains(err.Error(), "--redis-topology: want single, replicas, redlock, sentinel or cluster") {
		t.Errorf("a bad topology: %v", err)
	}
	k, set = parseKindFlags(t, "--observers", "1", "--tick", "100ms")
	if _, err := k.forKind(kind.MariaDB, set); err == nil || !strings.Contains(err.Error(), "--observers, --tick: ZooKeeper settings for the MariaDB service: add --service zookeeper") {
		t.Errorf("zookeeper flags on mariadb: %v", err)
	}
}
