package redis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// redisNet is a fresh run network for a Redis test, destroyed (and checked gone,
// with every redis-server whose files are under dir) at the test's end.
func redisNet(t *testing.T, dir string) *netns.Network {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.RedisServer)
	t.Cleanup(func() { // after the network's own
		if left := redisUnder(dir); len(left) > 0 {
			t.Errorf("redis-server processes left behind: %v", left)
		}
	})
	net, _ := lockservicetest.Net(t)
	return net
}

// redisUnder lists the redis-server processes whose working directory or
// configuration is under dir (other tests' instances are not this test's concern).
func redisUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isRedisServer(pid) {
			continue
		}
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.HasPrefix(cwd, dir) || strings.Contains(string(cmdline), dir) {
			out = append(out, pid)
		}
	}
	return out
}

func TestRedisTopologiesStartServeAndStop(t *testing.T) {
	cases := []struct {
		s     RedisSettings
		nodes int
	}{
		{RedisSettings{Topology: RedisSingle}, 1},
		{RedisSettings{Topology: RedisRedlock, Persistence: PersistAOFEverysec}, 3},
		{RedisSettings{Topology: RedisReplicas, Persistence: PersistAOFAlways}, 3},
	}
	for _, c := range cases {
		t.Run(string(c.s.Topology), func(t *testing.T) {
			dir := t.TempDir()
			net := redisNet(t, dir)
			ctx := context.Background()
			start := time.Now()
			cfgDir := dir
			if c.s.Topology == RedisSingle {
				// A relative directory, as zlockcheck's default store is: Redis's dir
				// directive changes its working directory before it opens its log.
				t.Chdir(dir)
				cfgDir = "."
			}
			r, err := StartRedis(ctx, net, RedisConfig{RedisSettings: c.s, Nodes: c.nodes, Dir: cfgDir})
			if r != nil {
				defer r.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s of %d serving after %s: %s", c.s.Topology, c.nodes, time.Since(start), r.Connect())
			checkRedisServes(t, r, c.nodes)
			checkServerOf(t, r, net)
			checkLockReader(t, r)
			checkKillAndRestart(t, r)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if left := redisUnder(dir); len(left) > 0 {
				t.Errorf("Close left redis-server processes: %v", left)
			}
		})
	}
}

// checkRedisServes checks Version, WaitServing, Leader, Nodes and Connect.
func checkRedisServes(t *testing.T, r *Redis, nodes int) {
	t.Helper()
	ctx := context.Background()
	if v := r.Version(ctx); !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Errorf("Version = %q", v)
	}
	if err := r.WaitServing(ctx, time.Second); err != nil {
		t.Error(err)
	}
	id, ok := r.Leader(ctx)
	switch r.cfg.Topology {
	case RedisRedlock:
		if ok {
			t.Errorf("RedLock's instances have no leader, got %d", id)
		}
	default:
		if !ok || id != 1 {
			t.Errorf("Leader = %d, %v; want 1", id, ok)
		}
	}
	ns := r.Nodes()
	if len(ns) != nodes {
		t.Fatalf("%d nodes, want %d", len(ns), nodes)
	}
	var addrs []string
	for i, n := range ns {
		if n.ID != i+1 || n.Host.Addr() != lockservice.ServerAddr(i+1) || n.Host.Pid() == 0 {
			t.Errorf("node %d: id %d at %s, pid %d", i, n.ID, n.Host.Addr(), n.Host.Pid())
		}
		addrs = append(addrs, lockservice.ServerAddr(i+1).String()+":6379")
	}
	if got := r.Connect(); got != strings.Join(addrs, ",") {
		t.Errorf("Connect = %q", got)
	}
	if !r.Managed() {
		t.Error("the tool's own instances are managed")
	}
	if r.cfg.Topology == RedisReplicas {
		m, err := r.info(ctx, r.Instances[2], "replication")
		if err != nil || m["role"] != "slave" || m["master_host"] != lockservice.ServerAddr(1).String() {
			t.Errorf("instance 3 is no replica of instance 1: %v %v", m, err)
		}
	}
}

// checkServerOf connects a client from a worker's namespace to the last instance and
// finds it there, by its session (client id) and by its address alone.
func checkServerOf(t *testing.T, r *Redis, net *netns.Network) {
	t.Helper()
	ctx := context.Background()
	w, err := net.AddHost(ctx, "w1", lockservicetest.WorkerAddr)
	if err != nil {
		t.Fatal(err)
	}
	last := r.Instances[len(r.Instances)-1]
	cli := w.Command("redis-cli", "-h", last.Host.Addr().String(), "-p", "6379", "SUBSCRIBE", "zlc-test-nothing")
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Process.Kill(); _ = cli.Wait() }()
	var id uint64
	for deadline := time.Now().Add(5 * time.Second); id == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		cs, _ := r.clients(ctx, last)
		for _, c := range cs {
			if c.host() == lockservicetest.WorkerAddr {
				id = c.ID
			}
		}
	}
	if id == 0 {
		t.Fatal("the client never showed in CLIENT LIST")
	}
	if got, ok := r.ServerOf(ctx, lockservicetest.WorkerAddr, lockservice.SessionName(id)); !ok || got != last.ID {
		t.Errorf("ServerOf(session %s) = %d, %v; want %d", lockservice.SessionName(id), got, ok, last.ID)
	}
	if got, ok := r.ServerOf(ctx, lockservicetest.WorkerAddr, ""); !ok || got != last.ID {
		t.Errorf("ServerOf(address only) = %d, %v; want %d", got, ok, last.ID)
	}
	if got, ok := r.ServerOf(ctx, lockservice.ServerAddr(200), ""); ok {
		t.Errorf("ServerOf(an address with no client) = %d", got)
	}
	if !r.LiveSessions(ctx)[lockservice.SessionName(id)] {
		t.Errorf("LiveSessions lacks %s: %v", lockservice.SessionName(id), r.LiveSessions(ctx))
	}
}

// checkLockReader sets the lock's key where a holder would and reads it back.
func checkLockReader(t *testing.T, r *Redis) {
	t.Helper()
	ctx := context.Background()
	lock, err := r.OpenLock(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	const key = "/zlc/test/lock"
	if names, err := lock.Entries(lockservice.PathLock(key), true); err != nil || len(names) != 0 {
		t.Fatalf("Entries of a free lock = %v, %v", names, err)
	}
	holders := []*lockservice.Member{r.Instances[0]}
	if r.cfg.Topology == RedisRedlock {
		// One instance is no majority: nobody holds the lock yet.
		if _, err := r.do(ctx, r.Instances[0], "SET", key, "0x2a:minority", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
		if names, _ := lock.Entries(lockservice.PathLock(key), true); len(names) != 0 {
			t.Errorf("a key on 1 of %d instances is an entry: %v", len(r.Instances), names)
		}
		holders = r.Instances[:len(r.Instances)/2+1]
	}
	for _, in := range holders {
		if _, err := r.do(ctx, in, "SET", key, "0x2a:c0ffee", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := lock.Entries(lockservice.PathLock(key), true); err != nil || !slices.Equal(names, []string{key}) {
		t.Errorf("Entries of a held lock = %v, %v", names, err)
	}
	if owner, ok, err := lock.Owner(lockservice.PathLock(key), key); err != nil || !ok || owner != "0x2a" {
		t.Errorf("Owner = %q, %v, %v; want 0x2a", owner, ok, err)
	}
	for _, in := range holders {
		if _, err := r.do(ctx, in, "DEL", key); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := lock.Owner(lockservice.PathLock(key), key); ok || err != nil {
		t.Errorf("Owner of a released lock: %v, %v", ok, err)
	}
	checkLibraryKey(t, r, lock, holders)
}

// checkLibraryKey: a library's own key (its prefix, a random value naming no
// client) is read when a worker's place names it, and owned by that place's session.
func checkLibraryKey(t *testing.T, r *Redis, lock lockservice.LockReader, holders []*lockservice.Member) {
	t.Helper()
	ctx := context.Background()
	const path, own = "/zlc/test/lib", "app:7:/zlc/test/lib"
	placed := lockservice.Lock{Path: path, Places: []workloads.LockPlace{{Session: "0x2b", Keys: []string{own}, Value: "f00d"}}}
	for _, in := range holders {
		if _, err := r.do(ctx, in, "SET", own, "f00d", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := lock.Entries(lockservice.PathLock(path), true); err != nil || len(names) != 0 {
		t.Errorf("Entries without the place = %v, %v; want none (the library's key is unknown)", names, err)
	}
	if names, err := lock.Entries(placed, true); err != nil || !slices.Equal(names, []string{own}) {
		t.Errorf("Entries with the place = %v, %v; want [%s]", names, err, own)
	}
	if owner, ok, err := lock.Owner(placed, own); err != nil || !ok || owner != "0x2b" {
		t.Errorf("Owner of the library's key = %q, %v, %v; want the place's session 0x2b", owner, ok, err)
	}
	for _, in := range holders {
		if _, err := r.do(ctx, in, "SET", own, "beef", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
	}
	if owner, ok, err := lock.Owner(placed, own); err != nil || !ok || owner == "0x2b" {
		t.Errorf("Owner of the key another value holds = %q, %v, %v; want not the place's session", owner, ok, err)
	}
	checkHashKey(t, r, lock, holders)
}

// checkHashKey: a lock kept in a hash (Redisson's layout, {id:threadId: count}) is
// read by its one field, as a string key by its value; a hash of two fields is no
// one holder's.
func checkHashKey(t *testing.T, r *Redis, lock lockservice.LockReader, holders []*lockservice.Member) {
	t.Helper()
	ctx := context.Background()
	const path = "/zlc/test/hash"
	placed := lockservice.Lock{Path: path, Places: []workloads.LockPlace{{Session: "0x2c", Keys: []string{path}, Value: "uuid-1:42"}}}
	for _, in := range holders {
		if _, err := r.do(ctx, in, "HSET", path, "uuid-1:42", "2"); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := lock.Entries(placed, true); err != nil || !slices.Equal(names, []string{path}) {
		t.Errorf("Entries of a held hash = %v, %v; want [%s]", names, err, path)
	}
	if owner, ok, err := lock.Owner(placed, path); err != nil || !ok || owner != "0x2c" {
		t.Errorf("Owner of the hash = %q, %v, %v; want the place's session 0x2c", owner, ok, err)
	}
	for _, in := range holders {
		if _, err := r.do(ctx, in, "HSET", path, "uuid-2:7", "1"); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := lock.Entries(placed, true); err != nil || len(names) != 0 {
		t.Errorf("Entries of a hash of two fields = %v, %v; want none", names, err)
	}
	for _, in := range holders {
		if _, err := r.do(ctx, in, "DEL", path); err != nil {
			t.Fatal(err)
		}
	}
}

// checkKillAndRestart kills the last instance: WaitServing fails naming it with its
// log; started again, it serves again.
func checkKillAndRestart(t *testing.T, r *Redis) {
	t.Helper()
	ctx := context.Background()
	last := r.Instances[len(r.Instances)-1]
	if err := last.Host.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	err := r.WaitServing(ctx, 2*time.Second)
	if err == nil {
		t.Fatal("WaitServing with an instance killed: no error")
	}
	for _, want := range []string{fmt.Sprintf("instance %d exited", last.ID), last.Log} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("WaitServing's error lacks %q:\n%v", want, err)
		}
	}
	// A line of the instance's log: "pid:role date * message".
	if !regexp.MustCompile(`\n    \d+:[MSCX] \d+ \w+ \d{4} `).MatchString(err.Error()) {
		t.Errorf("WaitServing's error lacks the instance's log:\n%v", err)
	}
	if err := last.Host.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitServing(ctx, 10*time.Second); err != nil {
		t.Errorf("after a restart: %v", err)
	}
}

// TestRedisThatWillNotStart: a port already in use, and a binary that is no Redis,
// are errors naming the instance and its log's last lines; nothing is left.
func TestRedisThatWillNotStart(t *testing.T) {
	dir := t.TempDir()
	// The "binary" starts a Redis of its own on the instance's port first.
	squatter := filepath.Join(dir, "squat.sh")
	script := fmt.Sprintf("#!/bin/sh\nmkdir -p %[1]s/squat\nredis-server --bind %[2]s --port 6379 --save '' --appendonly no --dir %[1]s/squat --daemonize no >/dev/null &\nsleep 0.3\nexec redis-server \"$@\"\n", dir, lockservice.ServerAddr(1))
	if err := os.WriteFile(squatter, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "fake-redis.sh")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'fake: no redis here' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		binary string
		want   []string
	}{
		{squatter, []string{"instance 1 exited", "Address already in use"}},
		{fake, []string{"instance 1 exited", "fake: no redis here"}},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.binary), func(t *testing.T) {
			sub := filepath.Join(dir, filepath.Base(c.binary)+".d")
			net := redisNet(t, dir)
			startRefused(t, net, RedisConfig{Dir: sub, Binary: c.binary}, c.want)
		})
	}
	if _, err := StartRedis(context.Background(), nil, RedisConfig{Dir: dir, Binary: filepath.Join(dir, "no-such-redis")}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a missing binary: %v", err)
	}
	if _, err := exec.LookPath("pgrep"); err == nil {
		if out, _ := exec.Command("pgrep", "-f", dir).Output(); len(out) > 0 {
			t.Errorf("processes left behind: %s", out)
		}
	}
}

// startRefused starts cfg on net, which must fail with an error holding every word of
// want; whatever was started is closed.
func startRefused(t *testing.T, net *netns.Network, cfg RedisConfig, want []string) {
	t.Helper()
	r, err := StartRedis(context.Background(), net, cfg)
	if r != nil {
		if cerr := r.Close(); cerr != nil {
			t.Error(cerr)
		}
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

// TestCleanupRedisKillsOnlyTheToolsLeftovers: an instance whose namespace was deleted
// under it is found and killed; instances in live namespaces, and a redis-server the
// tool did not start, are left alone.
func TestCleanupRedisKillsOnlyTheToolsLeftovers(t *testing.T) {
	dir := t.TempDir()
	net := redisNet(t, dir)
	ctx := context.Background()
	r, err := StartRedis(ctx, net, RedisConfig{RedisSettings: RedisSettings{Topology: RedisRedlock}, Nodes: 3, Dir: dir})
	if r != nil {
		defer r.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	foreignDir := filepath.Join(dir, "foreign")
	if err := os.Mkdir(foreignDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(foreignDir, "redis.sock")
	foreign := exec.Command("redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", foreignDir)
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = foreign.Process.Kill(); _ = foreign.Wait() }()
	orphan := r.Instances[2]
	pid := orphan.Host.Pid()
	if out, err := exec.Command("ip", "netns", "del", orphan.Host.String()).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	if !answers(sock) {
		t.Fatal("the foreign redis-server does not answer")
	}
	left, err := CleanupRedis()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Pid != pid || left[0].Conf != orphan.Conf {
		t.Fatalf("CleanupRedis = %+v; want only instance 3 (pid %d, %s)", left, pid, orphan.Conf)
	}
	if lockservice.Running(pid) {
		t.Error("instance 3 still runs")
	}
	if !answers(sock) || r.Instances[0].Host.Pid() == 0 || r.Instances[1].Host.Pid() == 0 {
		t.Error("CleanupRedis killed a server it should have left alone")
	}
	if err := r.WaitServing(ctx, time.Second); err == nil {
		t.Error("WaitServing with instance 3 killed: no error")
	}
}

// answers reports whether a redis-server answers PING on unix socket sock (waiting
// up to 5 s for it to start).
func answers(sock string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out, err := exec.Command("redis-cli", "-s", sock, "PING").Output(); err == nil && strings.TrimSpace(string(out)) == "PONG" {
			return true
		}
	}
	return false
}
