package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeRedis is a FAKE Redis cluster over a fakeCluster: it records the commands the
// faults send and answers them as a healthy instance would; its holder changes after
// the first look (a new grant after a failover's split).
type fakeRedis struct {
	*fakeCluster
	topology, persistence string
	cmds                  []string
	looks                 int
}

var _ RedisAdmin = (*fakeRedis)(nil)

func newFakeRedis(n int, topology string) *fakeRedis {
	return &fakeRedis{fakeCluster: newFakeCluster(n, 3), topology: topology, persistence: "none"}
}

func (f *fakeRedis) RedisSettings() (string, string, bool) { return f.topology, f.persistence, true }

func (f *fakeRedis) Command(_ context.Context, id int, args ...string) (any, error) {
	if args[0] == "EVAL" {
		args = []string{"EVAL", "<script>", args[2], args[3]}
	}
	f.cmds = append(f.cmds, fmt.Sprintf("s%d %s", id, strings.Join(args, " ")))
	switch args[0] {
	case "PING":
		return "PONG", nil
	case "INFO":
		return "role:slave\r\nmaster_link_status:up\r\n", nil
	case "EVAL":
		return []any{int64(1), int64(2)}, nil
	}
	return "OK", nil
}

func (f *fakeRedis) Holder() (Client, bool) {
	f.looks++
	return f.clients[min(f.looks, len(f.clients))-1], true
}

// TestFailoverPromotesDemotesAndRestores: the failover promotes a replica, waits for
// a new grant, makes the primary resync from the promoted replica, then restores the
// roles; the record names the lost grant's holder.
func TestFailoverPromotesDemotesAndRestores(t *testing.T) {
	f := newFakeRedis(3, "replicas")
	a, err := Failover{HolderWait: time.Second}.Apply(context.Background(), f, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	p := a.Value["promoted"].(string)
	addr := map[string]string{"s2": "10.77.1.2", "s3": "10.77.1.3"}[p]
	want := []string{p + " REPLICAOF NO ONE", "s1 REPLICAOF " + addr + " 6379", "s1 INFO replication",
		"s1 REPLICAOF NO ONE", p + " REPLICAOF 10.77.1.1 6379"}
	if !reflect.DeepEqual(f.cmds, want) {
		t.Fatalf("commands:\n got %q\nwant %q", f.cmds, want)
	}
	if a.Value["primary"] != "s1" || a.Value["holder"] != f.clients[1].Process {
		t.Fatalf("record %v: want primary s1, holder %d", a.Value, f.clients[1].Process)
	}
	f.cmds = nil
	if err := a.Undo(context.Background()); err != nil || len(f.cmds) != 2 {
		t.Fatalf("undo: %v, %q", err, f.cmds)
	}
}

// TestRedisFaultsRefused: failover wants the replicas topology, neither it nor
// clock-jump acts on a cluster whose servers are not Redis, and connection-kill not on
// one whose servers cannot end a client's session.
func TestRedisFaultsRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	if _, err := (Failover{}).Apply(ctx, newFakeRedis(1, "single"), rng); err == nil || !strings.Contains(err.Error(), "replicas topology") {
		t.Errorf("failover on a single instance: %v", err)
	}
	for _, f := range []Fault{Failover{}, ClockJump{Target: TargetOne, Delta: time.Second}} {
		if _, err := f.Apply(ctx, newFakeCluster(3, 1), rng); err == nil || !strings.Contains(err.Error(), "Redis instances only") {
			t.Errorf("%T on ZooKeeper: %v", f, err)
		}
	}
	if _, err := (ConnectionKill{Target: TargetHolder}).Apply(ctx, newFakeCluster(3, 1), rng); err == nil || !strings.Contains(err.Error(), "cannot end a client's session") {
		t.Errorf("connection-kill on ZooKeeper: %v", err)
	}
	if _, err := (ClockJump{Target: TargetOne}).Apply(ctx, newFakeRedis(1, "single"), rng); err == nil {
		t.Error("clock-jump of 0: want an error")
	}
}

// TestClockJumpRunsTheScriptOnThePrimary: Δ in ms, on the primary of a replicas
// topology whatever the target; the script's counts are recorded.
func TestClockJumpRunsTheScriptOnThePrimary(t *testing.T) {
	f := newFakeRedis(3, "replicas")
	a, err := ClockJump{Target: TargetAll, Delta: 1500 * time.Millisecond}.Apply(context.Background(), f, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s1 EVAL <script> 0 1500"}; !reflect.DeepEqual(f.cmds, want) {
		t.Fatalf("commands %q, want %q", f.cmds, want)
	}
	if a.Value["expired_s1"] != int64(2) || a.Value["delta_ms"] != int64(1500) {
		t.Fatalf("record %v", a.Value)
	}
}

// TestRestartKillsStartsAndWaits: restart kills and starts each target at once, waits
// for PING, and records the persistence setting.
func TestRestartKillsStartsAndWaits(t *testing.T) {
	f := newFakeRedis(1, "single")
	a, err := Restart{Target: TargetAll}.Apply(context.Background(), f, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kill 1", "restart 1"}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("host calls %q, want %q", f.calls, want)
	}
	if !reflect.DeepEqual(f.cmds, []string{"s1 PING"}) || a.Value["persistence"] != "none" || !reflect.DeepEqual(a.Value["forgetting"], []string{"s1"}) {
		t.Fatalf("commands %q, record %v", f.cmds, a.Value)
	}
}

// TestNamedClassesAreNotInAll: "all" stays the classes every service shares; the
// named classes parse by name.
func TestNamedClassesAreNotInAll(t *testing.T) {
	all, _ := ParseClasses("all")
	for _, c := range all {
		if slices.Contains(NamedClasses(), c) {
			t.Errorf("all includes %s", c)
		}
	}
	got, err := ParseClasses("restart,failover,clock-jump,connection-kill,client-vanish,compaction,coordination-partition,connection-reset")
	if err != nil || !reflect.DeepEqual(got, NamedClasses()) {
		t.Fatalf("ParseClasses: %v %v", got, err)
	}
}

// KillSession is the FAKE servers' end of a session: it records the CLIENT KILL that
// lockservice.Redis.KillSession sends (the session id in decimal).
func (f *fakeRedis) KillSession(_ context.Context, server int, session string) (int, error) {
	id, err := parseSessionID(session)
	if err != nil {
		return 0, err
	}
	f.cmds = append(f.cmds, fmt.Sprintf("s%d CLIENT KILL ID %d", server, id))
	return 1, nil
}

// KillFreesLocks: a Redis key lives on until its TTL.
func (f *fakeRedis) KillFreesLocks() bool { return false }

var _ SessionKiller = (*fakeRedis)(nil)

// TestConnectionKillEndsTheHoldersSession: the holder's session ends on the instance
// the servers say it uses; the record names the worker and the server, and does not
// say the locks were freed (a Redis key outlives its connection).
func TestConnectionKillEndsTheHoldersSession(t *testing.T) {
	f := newFakeRedis(3, "redlock")
	f.holderServer = 2
	a, err := ConnectionKill{Target: TargetHolder}.Apply(context.Background(), f, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s2 CLIENT KILL ID 257"}; !reflect.DeepEqual(f.cmds, want) { // 0x101
		t.Fatalf("commands %q, want %q", f.cmds, want)
	}
	if a.Value["process"] != 11 || a.Value["server"] != "s2" || a.Value["frees_locks"] != nil {
		t.Fatalf("record %v", a.Value)
	}
}

// TestConnectionKillAimsAtTheLocksSession: a worker whose acquire named the
// connection that holds its lock (a pooled client's) has that connection ended, not
// the session it reported last; the record names it.
func TestConnectionKillAimsAtTheLocksSession(t *testing.T) {
	f := newFakeRedis(1, "single")
	f.holderServer = 1
	for i := range f.clients {
		f.clients[i].LockSession = "0x2a"
	}
	a, err := ConnectionKill{Target: TargetHolder}.Apply(context.Background(), f, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s1 CLIENT KILL ID 42"}; !reflect.DeepEqual(f.cmds, want) {
		t.Fatalf("commands %q, want %q", f.cmds, want)
	}
	if a.Value["session"] != "0x2a" {
		t.Fatalf("record %v, want session 0x2a", a.Value)
	}
}

// TestRestartOfAReplicaForgetsNothing: on the replicas topology only the primary's
// restart can forget a key.
func TestRestartOfAReplicaForgetsNothing(t *testing.T) {
	for target, want := range map[Target][]string{TargetLeader: {"s1"}, TargetAll: {"s1"}} {
		a, err := Restart{Target: target}.Apply(context.Background(), newFakeRedis(3, "replicas"), rand.New(rand.NewPCG(1, 2)))
		if err != nil || !reflect.DeepEqual(a.Value["forgetting"], want) {
			t.Errorf("%s: %v, %v; want forgetting %v", target, a.Value, err, want)
		}
	}
	if got := forgetting(context.Background(), newFakeRedis(3, "replicas"), []int{2, 3}); len(got) != 0 {
		t.Errorf("replicas s2, s3: forgetting %v, want none", got)
	}
}
