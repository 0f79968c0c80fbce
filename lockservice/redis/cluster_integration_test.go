package redis

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// TestRedisClusterFormsAndFailsOver: six instances form a cluster of three primaries
// with a replica each (every instance says cluster_state:ok, each replica linked to
// its primary); a lock key's slot is the one CLUSTER KEYSLOT gives, the harness reads
// the key on the primary that serves it, and Leader is that primary once the run
// names the key. Killed, that primary is replaced by its replica, which the cluster
// promotes by itself, and the harness then reads the key there; the run's watch
// records nothing while the cluster is settled, then a failover from the killed
// primary, over once every instance names the promoted replica; restarted, the old
// primary serves again as a replica. The sweep finds an instance whose namespace is
// gone by its redis.conf, and Close leaves nothing.
func TestRedisClusterFormsAndFailsOver(t *testing.T) {
	dir := t.TempDir()
	net := redisNet(t, dir)
	ctx := context.Background()
	start := time.Now()
	r, err := StartRedis(ctx, net, RedisConfig{RedisSettings: RedisSettings{Topology: RedisCluster}, Dir: dir})
	if r != nil {
		defer r.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a cluster of %d instances formed after %s", len(r.Instances), time.Since(start))
	if len(r.Instances) != 6 || !r.RedisCluster() || !r.Settings().FailsOverItself() {
		t.Fatalf("%d instances (cluster %v), want 6 of a cluster", len(r.Instances), r.RedisCluster())
	}
	for _, in := range r.Instances {
		b, err := os.ReadFile(in.Conf)
		if err != nil || !strings.HasPrefix(string(b), redisMarker) || !strings.Contains(string(b), "cluster-enabled yes") {
			t.Errorf("instance %d's %s: %v\n%.400s", in.ID, in.Conf, err, b)
		}
		if _, err := os.Stat(filepath.Join(in.Dir, "nodes.conf")); err != nil {
			t.Errorf("instance %d keeps no cluster state in its directory: %v", in.ID, err)
		}
	}
	if id, ok := r.Leader(ctx); ok {
		t.Errorf("Leader = %d before the run names its lock key; want none", id)
	}

	const key = "/zlc/test/l0"
	if v, err := r.Command(ctx, 1, "CLUSTER", "KEYSLOT", key); err != nil || v != int64(redisopt.KeySlot(key)) {
		t.Fatalf("CLUSTER KEYSLOT %s = %v, %v; KeySlot says %d", key, v, err, redisopt.KeySlot(key))
	}
	r.SetLockKey(key)
	home, err := r.home(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if home.ID > clusterPrimaries || !primaryRanges(clusterPrimaries)[home.ID-1].contains(redisopt.KeySlot(key)) {
		t.Fatalf("home of %s (slot %d) = instance %d", key, redisopt.KeySlot(key), home.ID)
	}
	if id, ok := r.Leader(ctx); !ok || id != home.ID {
		t.Errorf("Leader = %d, %v; want instance %d, which serves the lock's slot", id, ok, home.ID)
	}
	// On the primary, then on its replica too (WAIT), so that the promoted replica has it.
	out, err := r.call(ctx, home, []string{"SET", key, "0x1f:token"}, []string{"WAIT", "1", "2000"})
	if err != nil || out[0] != "OK" || out[1] != int64(1) {
		t.Fatalf("SET and WAIT on instance %d: %v, %v", home.ID, out, err)
	}
	checkClusterLock(t, r, key, "0x1f")
	checkQuorumLock(t, r)

	watchCtx, endWatch := context.WithCancel(ctx)
	seen := make(chan lockservice.Failover, 16)
	watched := make(chan struct{})
	go func() { defer close(watched); r.WatchFailovers(watchCtx, func(f lockservice.Failover) { seen <- f }) }()
	defer func() { endWatch(); <-watched }()
	time.Sleep(10 * failoverPoll) // a settled cluster: nothing recorded
	select {
	case f := <-seen:
		t.Fatalf("the watch recorded %+v before any fault", f)
	default:
	}

	killed := time.Now()
	if err := home.Host.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	replica := home.ID + clusterPrimaries
	var promoted int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if in, err := r.home(ctx, key); err == nil && in.ID != home.ID {
			promoted = in.ID
			break
		}
	}
	if promoted != replica {
		t.Fatalf("15 s after instance %d was killed, instance %d serves %s; want its replica, instance %d (its log: %s)",
			home.ID, promoted, key, replica, r.Instances[replica-1].Log)
	}
	t.Logf("the cluster promoted instance %d %s after instance %d was killed", replica, time.Since(killed), home.ID)
	if m, err := r.info(ctx, r.Instances[replica-1], "replication"); err != nil || m["role"] != "master" {
		t.Errorf("instance %d after its promotion: role %q, %v", replica, m["role"], err)
	}
	if id, ok := r.Leader(ctx); !ok || id != replica {
		t.Errorf("Leader after the failover = %d, %v; want %d", id, ok, replica)
	}
	checkClusterLock(t, r, key, "0x1f")
	var records []lockservice.Failover
	for len(records) < 2 {
		select {
		case f := <-seen:
			records = append(records, f)
		case <-time.After(10 * time.Second):
			t.Fatalf("the watch recorded %+v, want a failover's start and stop", records)
		}
	}
	from, to := serverName(home.ID), serverName(replica)
	if start, stop := records[0], records[1]; start.Stop || start.By != "cluster" || start.Primary != from ||
		!stop.Stop || stop.Primary != from || stop.Promoted != to || stop.Aborted || !slices.Equal(stop.Primaries, []string{to}) {
		t.Errorf("the watch recorded %+v, want a failover's start from %s and its stop naming %s", records, from, to)
	}
	t.Logf("the watch recorded %+v", records)
	endWatch()
	<-watched

	if err := home.Host.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitServing(ctx, 20*time.Second); err != nil {
		t.Fatalf("the old primary, restarted: %v", err)
	}
	if m, err := r.info(ctx, home, "replication"); err != nil || m["role"] != "slave" || m["master_host"] != lockservice.ServerAddr(replica).String() {
		t.Errorf("the old primary, restarted: %v, %v; want a replica of instance %d", m, err, replica)
	}

	orphan := r.Instances[5]
	if orphan.ID == replica {
		orphan = r.Instances[4]
	}
	pid := orphan.Host.Pid()
	if out, err := exec.Command("ip", "netns", "del", orphan.Host.String()).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	left, err := CleanupRedis()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Pid != pid || left[0].Conf != orphan.Conf {
		t.Errorf("CleanupRedis = %+v; want only instance %d (pid %d, %s)", left, orphan.ID, pid, orphan.Conf)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if left := redisUnder(dir); len(left) > 0 {
		t.Errorf("Close left processes: %v", left)
	}
}

// checkClusterLock reads the lock's key through the harness's reader: held by
// owner, read on the primary that serves its slot.
func checkClusterLock(t *testing.T, r *Redis, key, owner string) {
	t.Helper()
	lock, err := r.OpenLock(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	l := lockservice.PathLock(key)
	names, err := lock.Entries(l, true)
	if err != nil || len(names) != 1 || names[0] != key {
		t.Fatalf("Entries = %v, %v; want %s", names, err, key)
	}
	if got, ok, err := lock.Owner(l, key); err != nil || !ok || got != owner {
		t.Errorf("Owner = %q, %v, %v; want %s", got, ok, err, owner)
	}
}

// checkQuorumLock reads a lock held by a majority of keys of the cluster
// (locknames.ClusterRedLockKeys: two on instance 3, one on instance 2) through the
// harness's reader: one entry, named the lock's path, while two of the three keys
// hold one value, its owner that value's (the place that wrote it, else the value's
// own prefix); none while no value is on two keys.
func checkQuorumLock(t *testing.T, r *Redis) {
	t.Helper()
	ctx := context.Background()
	const path = "/zlc/quorum/l0"
	keys := locknames.ClusterRedLockKeys(path)
	homes := make([]int, len(keys))
	for i, k := range keys {
		in, err := r.home(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		homes[i] = in.ID
	}
	if !slices.Equal(homes, []int{3, 2, 3}) {
		t.Fatalf("the quorum's keys %q are on instances %v, want [3 2 3]", keys, homes)
	}
	set := func(i int, value string) {
		t.Helper()
		if _, err := r.Command(ctx, homes[i], "SET", keys[i], value); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := r.OpenLock(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	l := lockservice.Lock{Path: path, Quorum: keys, Places: []workloads.LockPlace{{Session: "0x2a", Keys: keys, Value: "w:2"}}}
	for _, step := range []struct {
		key   int
		value string
		owner string // "": no entry
	}{
		{1, "w:2", ""}, {0, "0x7:v", ""}, {2, "0x7:v", "0x7"}, {0, "w:2", "0x2a"}, {1, "0x9:x", ""},
	} {
		set(step.key, step.value)
		names, err := lock.Entries(l, true)
		owner, ok, errOwner := lock.Owner(l, path)
		want := []string{path}
		if step.owner == "" {
			want = nil
		}
		if err != nil || errOwner != nil || !slices.Equal(names, want) || ok != (step.owner != "") || owner != step.owner {
			t.Errorf("%s set to %q: Entries %v, %v; Owner %q, %v, %v; want %v owned by %q", keys[step.key], step.value, names, err, owner, ok, errOwner, want, step.owner)
		}
	}
	for i := range keys {
		if _, err := r.Command(ctx, homes[i], "DEL", keys[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedisClusterThatWillNotForm: instances whose cluster support is off, or whose
// cluster bus no other instance can reach, are an error that names what the tool
// did or waited for, and nothing is left.
func TestRedisClusterThatWillNotForm(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name  string
		extra string // redis-server's arguments after the configuration
		want  []string
	}{
		{"cluster disabled", "--cluster-enabled no", []string{"redis cluster: instance 1: CLUSTER SET-CONFIG-EPOCH, MYID", "cluster support disabled"}},
		{"bus out of reach", "--cluster-announce-bus-port 1", []string{"redis cluster not formed", "not every instance knows every other within 3s", "instance 2"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sub := filepath.Join(dir, strconv.Itoa(i))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			wrapper := filepath.Join(sub, "redis-server-wrapper.sh")
			if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec redis-server \"$@\" "+c.extra+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			net := redisNet(t, sub)
			startRefused(t, net, RedisConfig{RedisSettings: RedisSettings{Topology: RedisCluster}, Nodes: 3,
				Dir: sub, Binary: wrapper, StartTimeout: 3 * time.Second}, c.want)
			if left := redisUnder(sub); len(left) > 0 {
				t.Errorf("processes left: %v", left)
			}
		})
	}
}
