package nemesis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/nemesis"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// requireIntegration skips tests that need root, network namespaces, nftables and
// ZooKeeper (fails under ZLC_REQUIRE_INTEGRATION, see testenv).
func requireIntegration(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.IPRoute2,
		testenv.NFTables, testenv.TrafficControl, testenv.Bash, testenv.Timeout)
}

// testSessionTimeout is the helpers' session timeout: short, so tests are quick.
const testSessionTimeout = 2 * time.Second

// env is a real ensemble of three servers in their own namespaces, plus worker
// namespaces holding helper processes, for one test.
type env struct {
	runID string
	nw    *netns.Network
	ens   *zookeeper.Ensemble
	obs   *zk.Conn
	root  string

	mu      sync.Mutex
	hosts   map[int]netns.Host
	clients []*helper
}

func startEnv(t *testing.T) *env {
	t.Helper()
	requireIntegration(t)
	dir := lockservicetest.OpenDir(t)
	// Registered before the fixture's teardown, it runs after it: a server that did
	// not start has its log read too.
	t.Cleanup(func() { logServersOnFailure(t, dir) })
	start := time.Now()
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.ZooKeeper, Dir: dir, Nodes: 3,
		Settings: zookeeper.EnsembleConfig{SyncLimit: 10}})
	e := &env{runID: f.RunID, nw: f.Net, ens: f.Service.(*zookeeper.Ensemble), hosts: map[int]netns.Host{}}
	t.Logf("run %s: 3 servers serving after %s", e.runID, time.Since(start).Round(time.Millisecond))
	e.obs = observer(t, e.nw, e.ens.Connect())
	e.root = "/zlc-nemesis-" + e.runID
	if _, err := e.obs.Create(e.root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	return e
}

// logServersOnFailure logs the session and election lines of the logs of the
// servers under dir when the test failed (the logs go with the test's temporary
// directory).
func logServersOnFailure(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "server.log"))
	for _, log := range logs {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Logf("%s: %v", log, err)
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "ession") || strings.Contains(l, "LEADING") || strings.Contains(l, "FOLLOWING") || strings.Contains(l, "alidat") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 200 {
			lines = lines[len(lines)-200:]
		}
		t.Logf("%s, session and election lines:\n%s", log, strings.Join(lines, "\n"))
	}
}

// worker starts a helper in worker slot's namespace (created on first use) and makes
// it the cluster's only client unless keep is set.
func (e *env) worker(t *testing.T, slot int, timeout time.Duration, keep bool) *helper {
	t.Helper()
	e.mu.Lock()
	host, ok := e.hosts[slot]
	e.mu.Unlock()
	if !ok {
		var err error
		host, err = e.nw.AddHost(context.Background(), fmt.Sprintf("w%d", slot), netip.AddrFrom4([4]byte{10, 77, 2, byte(slot)}))
		if err != nil {
			t.Fatal(err)
		}
		e.mu.Lock()
		e.hosts[slot] = host
		e.mu.Unlock()
	}
	h := startHelper(t, host, e.ens.Connect(), timeout, fmt.Sprintf("%s/w%d", e.root, slot))
	e.mu.Lock()
	if !keep {
		e.clients = nil
	}
	e.clients = append(e.clients, h)
	e.mu.Unlock()
	return h
}

// cluster is nemesis.Cluster over the test's real ensemble and helpers.
type cluster struct{ e *env }

var _ nemesis.Cluster = (*cluster)(nil)

func (c *cluster) Servers() []nemesis.Server {
	var out []nemesis.Server
	for _, s := range c.e.ens.Servers {
		out = append(out, nemesis.Server{ID: s.ID, Host: s.Host})
	}
	return out
}

func (c *cluster) Leader(ctx context.Context) (int, bool) {
	if s := c.e.ens.LeaderServer(ctx); s != nil {
		return s.ID, true
	}
	return 0, false
}

func (c *cluster) Clients() []nemesis.Client {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	var out []nemesis.Client
	for i, h := range c.e.clients {
		if !h.alive() {
			continue
		}
		s := h.session()
		slot, _ := strconv.Atoi(strings.TrimPrefix(h.host.Name, "w"))
		out = append(out, nemesis.Client{Process: i + 1, Slot: slot, Netns: h.host.Netns, Addr: h.host.Addr,
			Pid: h.pid, SessionID: s.Session, Passwd: s.Passwd})
	}
	return out
}

// Holder pretends the live helper started last holds the lock (helpers hold none):
// enough to aim at one without waiting for a holder.
func (c *cluster) Holder() (nemesis.Client, bool) {
	cs := c.Clients()
	if len(cs) == 0 {
		return nemesis.Client{}, false
	}
	return cs[len(cs)-1], true
}

// Idle: the helpers run no lock cycles; the first live helper counts as idle.
func (c *cluster) Idle() (nemesis.Client, bool) {
	cs := c.Clients()
	if len(cs) == 0 {
		return nemesis.Client{}, false
	}
	return cs[0], true
}

// Waiter: the helpers run no lock cycles; the first live helper counts as waiting.
func (c *cluster) Waiter() (nemesis.Client, bool) { return c.Idle() }

// ServerOf: the helpers' connections are not looked up.
func (c *cluster) ServerOf(context.Context, nemesis.Client) (int, bool) { return 0, false }

func (c *cluster) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return c.e.nw.Dial(ctx, addr, timeout)
}

// waitUntil polls cond every 100 ms until it holds or timeout passes.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assertHealed checks that no nemesis table is left in any of the run's namespaces and
// that every server serves again (one leader).
func (e *env) assertHealed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, h := range e.nw.Hosts() {
		out, err := netns.Exec(ctx, h.Netns, nil, "nft", "list", "tables")
		if err != nil {
			t.Errorf("nft in %s: %v", h.Netns, err)
		}
		if strings.Contains(string(out), "zlc_") {
			t.Errorf("nemesis tables left in %s: %s", h.Netns, out)
		}
	}
	start := time.Now()
	if err := e.ens.WaitServing(ctx, 60*time.Second); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	leaders := 0
	for _, st := range e.ens.Statuses(ctx) {
		if st.Mode == "leader" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("after heal: %d leaders", leaders)
	}
	t.Logf("after heal: every server serves again (waited %s)", time.Since(start).Round(time.Millisecond))
}

func serverID(t *testing.T, name string) int {
	t.Helper()
	id, err := strconv.Atoi(strings.TrimPrefix(name, "s"))
	if err != nil {
		t.Fatalf("bad server name %q", name)
	}
	return id
}

func (e *env) exists(t *testing.T, path string) bool {
	t.Helper()
	ok, _, err := e.obs.Exists(path)
	if err != nil {
		t.Fatalf("exists %s: %v", path, err)
	}
	return ok
}

func TestIntegration(t *testing.T) {
	e := startEnv(t)
	c := &cluster{e: e}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(20, 26))

	t.Run("partition isolate-leader", func(t *testing.T) {
		old := e.ens.LeaderServer(ctx)
		if old == nil {
			t.Fatal("no leader")
		}
		a, err := nemesis.Partition{Shape: nemesis.IsolateLeader}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("value: %v", a.Value)
		if a.Value["leader"] != fmt.Sprintf("s%d", old.ID) {
			t.Fatalf("value names leader %v, the leader is s%d", a.Value["leader"], old.ID)
		}
		out, err := netns.Exec(ctx, old.Host.String(), nil, "nft", "list", "table", "inet", "zlc_partition")
		if err != nil || strings.Count(string(out), "10.77.1.") != 2 {
			t.Fatalf("old leader's table: %v\n%s", err, out)
		}
		start := time.Now()
		var newLeader int
		ok := waitUntil(30*time.Second, func() bool {
			sts := e.ens.Statuses(ctx)
			newLeader = 0
			for _, st := range sts {
				if st.ID != old.ID && st.Mode == "leader" {
					newLeader = st.ID
				}
			}
			return !sts[old.ID-1].Serving() && newLeader != 0
		})
		if !ok {
			t.Fatalf("within 30 s, want s%d not serving and a new leader: %+v", old.ID, e.ens.Statuses(ctx))
		}
		t.Logf("observed: old leader s%d stopped serving (srvr: %q) and s%d was elected %s after the partition",
			old.ID, e.ens.Statuses(ctx)[old.ID-1].Error, newLeader, time.Since(start).Round(time.Millisecond))
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Undo(ctx); err != nil {
			t.Fatalf("second undo: %v", err)
		}
		e.assertHealed(t)
	})

	t.Run("partition isolate-follower-quorum", func(t *testing.T) {
		h := e.worker(t, 8, testSessionTimeout, false)
		a, err := nemesis.Partition{Shape: nemesis.IsolateFollowerQuorum}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		grudge := a.Value["grudge"].(map[string][]string)
		cut := ""
		for s, drops := range grudge {
			if len(drops) == 2 {
				cut = s
			}
		}
		if cut == "" || cut == a.Value["leader"] {
			t.Fatalf("want a follower cut off from both peers: %v", a.Value)
		}
		// Its clients still reach it and get answers while its peers cannot.
		script := fmt.Sprintf("exec 3<>/dev/tcp/%s/2181; echo srvr >&3; cat <&3", lockservice.ServerAddr(serverID(t, cut)))
		out, err := netns.Exec(ctx, h.host.Netns, nil, "timeout", "2", "bash", "-c", script)
		if err != nil || !strings.Contains(string(out), "Mode: follower") {
			t.Fatalf("worker asking the cut follower %s: %v: %s", cut, err, out)
		}
		peer := e.ens.Servers[0]
		if peer.ID == serverID(t, cut) {
			peer = e.ens.Servers[1]
		}
		probe := fmt.Sprintf("exec 3<>/dev/tcp/%s/2181", lockservice.ServerAddr(serverID(t, cut)))
		if _, err := netns.Exec(ctx, peer.Host.String(), nil, "timeout", "1", "bash", "-c", probe); err == nil {
			t.Fatalf("peer s%d still reaches the cut follower %s", peer.ID, cut)
		}
		t.Logf("observed: follower %s cut off from its peers (s%d cannot connect to it) still answers a client: Mode: follower", cut, peer.ID)
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		e.assertHealed(t)
	})

	t.Run("pause", func(t *testing.T) {
		a, err := nemesis.Pause{Target: nemesis.TargetOne}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pids := a.Value["pids"].(map[string]int)
		if len(pids) != 1 {
			t.Fatalf("pids %v", pids)
		}
		for name, pid := range pids {
			if !waitUntil(2*time.Second, func() bool { return procState(pid) == "T" }) {
				t.Fatalf("%s (pid %d) state %q, want T", name, pid, procState(pid))
			}
			st := e.ens.Statuses(ctx)[serverID(t, name)-1]
			if st.Serving() {
				t.Fatalf("paused %s still answers srvr: %+v", name, st)
			}
			t.Logf("observed: %s (pid %d) in state T; srvr: %q", name, pid, st.Error)
			if err := a.Undo(ctx); err != nil {
				t.Fatal(err)
			}
			if !waitUntil(2*time.Second, func() bool { return procState(pid) != "T" }) {
				t.Fatalf("%s still stopped after undo", name)
			}
			t.Logf("observed: after undo %s is in state %s", name, procState(pid))
		}
		e.assertHealed(t)
	})

	t.Run("kill leader and restart", func(t *testing.T) {
		a, err := nemesis.Kill{Target: nemesis.TargetLeader}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		killed := serverID(t, a.Value["servers"].([]string)[0])
		if pid := e.ens.Servers[killed-1].Host.Pid(); pid != 0 {
			t.Fatalf("killed s%d still has pid %d", killed, pid)
		}
		start := time.Now()
		var newLeader int
		if !waitUntil(30*time.Second, func() bool {
			newLeader = 0
			for _, st := range e.ens.Statuses(ctx) {
				if st.ID != killed && st.Mode == "leader" {
					newLeader = st.ID
				}
			}
			return newLeader != 0
		}) {
			t.Fatalf("no new leader after killing s%d", killed)
		}
		t.Logf("observed: leader s%d killed (no pid), s%d elected after %s", killed, newLeader, time.Since(start).Round(time.Millisecond))
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		if e.ens.Servers[killed-1].Host.Pid() == 0 {
			t.Fatalf("s%d not restarted", killed)
		}
		e.assertHealed(t)
	})

	t.Run("packet loss and delay", func(t *testing.T) {
		a, err := nemesis.Packet{Target: nemesis.TargetOne, Loss: 50}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := serverID(t, a.Value["servers"].([]string)[0])
		s := e.ens.Servers[id-1]
		const sent = 2000
		script := fmt.Sprintf("for i in $(seq %d); do echo x >/dev/udp/%s/9; done", sent, s.Host.Addr())
		if out, err := netns.Exec(ctx, e.nw.HubNetns(), nil, "bash", "-c", script); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		out, err := netns.Exec(ctx, s.Host.String(), nil, "nft", "list", "chain", "inet", "zlc_packet", "input")
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`counter packets (\d+)`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("no counter in %s", out)
		}
		dropped, _ := strconv.Atoi(m[1])
		ratio := float64(dropped) / sent
		t.Logf("observed: s%d's input dropped %d packets while %d datagrams were sent to it (%.0f%%; loss 50%%)", id, dropped, sent, 100*ratio)
		if ratio < 0.4 || ratio > 0.7 {
			t.Fatalf("loss ratio %.2f, want about 0.5", ratio)
		}
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}

		d, err := nemesis.Packet{Target: nemesis.TargetOne, Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond}.Apply(ctx, c, rng)
		var unavailable *nemesis.NetemUnavailableError
		switch {
		case errors.As(err, &unavailable):
			t.Logf("observed: delay refused on this kernel: %v", err)
		case err != nil:
			t.Fatal(err)
		default:
			t.Logf("observed: netem available, delay applied: %v", d.Value)
		}
		if err := d.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		for _, s := range e.ens.Servers {
			out, _ := netns.Exec(ctx, s.Host.String(), nil, "tc", "qdisc", "show", "dev", "eth0")
			if strings.Contains(string(out), "netem") {
				t.Fatalf("netem left on s%d: %s", s.ID, out)
			}
		}
		e.assertHealed(t)
	})

	t.Run("client-partition", func(t *testing.T) {
		h := e.worker(t, 1, testSessionTimeout, false)
		if !e.exists(t, h.path) {
			t.Fatal("helper's ephemeral node missing")
		}
		a, err := nemesis.ClientPartition{Target: nemesis.TargetRandomClient}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if !waitUntil(3*testSessionTimeout, func() bool { return !e.exists(t, h.path) }) {
			t.Fatalf("ephemeral node still there %s after cutting the worker off", time.Since(start))
		}
		gone := time.Since(start)
		if !h.alive() {
			t.Fatal("worker died")
		}
		t.Logf("observed: ephemeral node of session %s vanished %s after the cut; worker pid %d alive (state %s)",
			h.session().Session, gone.Round(time.Millisecond), h.pid, h.state())
		time.Sleep(time.Until(start.Add(2 * testSessionTimeout)))
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := h.waitFor(10*time.Second, func(m helperMsg) bool { return m.State == "StateExpired" }); !ok {
			t.Fatalf("worker never learned its session expired: %v", h.states())
		}
		t.Logf("observed: after the heal the worker saw %v", h.states())
		e.assertHealed(t)
	})

	t.Run("session-expire", func(t *testing.T) {
		h := e.worker(t, 2, testSessionTimeout, false)
		if !e.exists(t, h.path) {
			t.Fatal("helper's ephemeral node missing")
		}
		start := time.Now()
		a, err := nemesis.SessionExpire{Target: nemesis.TargetRandomClient, SessionTimeout: testSessionTimeout}.Apply(ctx, c, rng)
		if err != nil {
			t.Fatal(err)
		}
		if !waitUntil(2*time.Second, func() bool { return !e.exists(t, h.path) }) {
			t.Fatal("ephemeral node still there after closeSession")
		}
		if !h.alive() {
			t.Fatal("worker died")
		}
		t.Logf("observed: closed session %s through %v (zxid %v): ephemeral node gone %s later; worker pid %d alive (state %s)",
			a.Value["session"], a.Value["server"], a.Value["zxid"], time.Since(start).Round(time.Millisecond), h.pid, h.state())
		if r, ok := a.Value["confirmed_by"]; ok {
			t.Logf("observed: the close went unanswered; confirmed by %v", r)
		}
		if _, ok := h.waitFor(10*time.Second, func(m helperMsg) bool { return m.State == "StateExpired" }); !ok {
			t.Fatalf("worker never learned its session expired: %v", h.states())
		}
		t.Logf("observed: the still-running worker then saw %v", h.states())
		_, err = nemesis.SessionExpire{Target: nemesis.TargetRandomClient, SessionTimeout: testSessionTimeout}.Apply(ctx, c, rng)
		if err == nil || !strings.Contains(err.Error(), "expired or the password is wrong") {
			t.Fatalf("expiring an expired session: %v", err)
		}
		e.assertHealed(t)
	})

	t.Run("client-pause", func(t *testing.T) {
		h := e.worker(t, 3, testSessionTimeout, false)
		a, err := nemesis.ClientPause{Target: nemesis.TargetRandomClient}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if !waitUntil(time.Second, func() bool { return h.state() == "T" }) {
			t.Fatalf("worker state %q, want T", h.state())
		}
		if !waitUntil(3*testSessionTimeout, func() bool { return !e.exists(t, h.path) }) {
			t.Fatal("ephemeral node still there while the worker is paused")
		}
		t.Logf("observed: worker pid %d in state %s; its ephemeral node vanished %s after the pause",
			h.pid, h.state(), time.Since(start).Round(time.Millisecond))
		time.Sleep(time.Until(start.Add(2 * testSessionTimeout)))
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		if !waitUntil(time.Second, func() bool { return h.state() != "T" }) {
			t.Fatal("worker still stopped")
		}
		if _, ok := h.waitFor(10*time.Second, func(m helperMsg) bool { return m.State == "StateExpired" }); !ok {
			t.Fatalf("resumed worker never learned its session expired: %v", h.states())
		}
		t.Logf("observed: resumed (state %s), the worker saw %v", h.state(), h.states())
		e.assertHealed(t)
	})

	t.Run("reply-loss", func(t *testing.T) {
		const timeout = 3 * time.Second
		h := e.worker(t, 4, timeout, false)
		a, err := nemesis.ReplyLoss{Target: nemesis.TargetRandomClient}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hold := time.Duration(nemesis.ReplyLossFraction * float64(timeout))
		start := time.Now()
		if _, ok := h.waitFor(hold, func(m helperMsg) bool { return m.State == "StateDisconnected" }); !ok {
			t.Fatalf("worker did not lose its connection within %s: %v", hold, h.states())
		}
		lost := time.Since(start)
		time.Sleep(time.Until(start.Add(hold)))
		if !e.exists(t, h.path) {
			t.Fatal("session expired during the reply loss")
		}
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("observed: worker saw connection loss %s into the reply loss; its session and ephemeral node were still alive at the heal (%s)",
			lost.Round(time.Millisecond), hold)
		_, ok := h.waitFor(2*timeout, func(m helperMsg) bool {
			return m.State == "StateHasSession" || m.State == "StateExpired"
		})
		if ok && !slices.Contains(h.states(), "StateExpired") {
			t.Logf("observed: worker reconnected with its session %s: %v", h.session().Session, h.states())
		} else {
			t.Logf("observed: go-zookeeper's paced reconnects missed the window; worker saw %v", h.states())
		}
		e.assertHealed(t)
	})

	t.Run("connection-reset", func(t *testing.T) {
		const timeout = 4 * time.Second     // a read timeout (2/3) longer than the silence
		h := e.worker(t, 9, timeout, false) // a slot no later subtest reuses: its node outlives it by a session
		// A raw connection from the worker's namespace, open before the fault, that
		// sends a four-letter word into the silence: a request in flight.
		script := fmt.Sprintf("exec 3<>/dev/tcp/%s/2181; sleep 1; echo srvr >&3; cat <&3", lockservice.ServerAddr(1))
		type result struct {
			out []byte
			at  time.Time
		}
		done := make(chan result, 1)
		go func() {
			out, _ := netns.Exec(ctx, h.host.Netns, nil, "timeout", "10", "bash", "-c", script)
			done <- result{out, time.Now()}
		}()
		time.Sleep(300 * time.Millisecond) // the raw connection is open, its request not sent
		a, err := nemesis.ConnectionReset{Target: nemesis.TargetRandomClient}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ports, _ := a.Value["ports"].([]int); len(ports) < 2 {
			t.Fatalf("silenced %v, want the helper's connection and the raw one", a.Value["ports"])
		}
		time.Sleep(1500 * time.Millisecond) // the request goes out into the silence
		reset := time.Now()
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if strings.Contains(string(r.out), "Zookeeper version") {
			t.Fatalf("the request sent into the silence was answered: %s", r.out)
		}
		if d := r.at.Sub(reset); d > 2*time.Second {
			t.Fatalf("the raw connection ended %s after the reset, want at once", d)
		}
		if _, ok := h.waitFor(timeout, func(m helperMsg) bool { return m.State == "StateHasSession" }); !ok {
			t.Fatalf("worker did not get its session back: %v", h.states())
		}
		if st := h.states(); !slices.Contains(st, "StateDisconnected") || slices.Contains(st, "StateExpired") {
			t.Fatalf("worker saw %v, want a connection loss and its session back", st)
		}
		if !e.exists(t, h.path) {
			t.Fatal("the worker's ephemeral node is gone: its session did not survive")
		}
		t.Logf("observed: the request sent into the silence was never answered (raw connection ended %s after the reset); the worker saw %v and kept its session",
			r.at.Sub(reset).Round(time.Millisecond), h.states())
		e.assertHealed(t)
	})

	t.Run("client-server-partition", func(t *testing.T) {
		h := e.worker(t, 5, testSessionTimeout, false)
		a, err := nemesis.ClientServerPartition{Target: nemesis.TargetLeader}.Apply(ctx, c, rng)
		defer a.Undo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cut := serverID(t, a.Value["servers"].([]string)[0])
		reach := func(id int) bool {
			script := fmt.Sprintf("exec 3<>/dev/tcp/%s/2181", lockservice.ServerAddr(id))
			_, err := netns.Exec(ctx, h.host.Netns, nil, "timeout", "1", "bash", "-c", script)
			return err == nil
		}
		for _, s := range e.ens.Servers {
			if got, want := reach(s.ID), s.ID != cut; got != want {
				t.Fatalf("worker reaches s%d: %v, want %v", s.ID, got, want)
			}
		}
		for _, st := range e.ens.Statuses(ctx) {
			if !st.Serving() {
				t.Fatalf("s%d stopped serving: its peers must not be cut: %+v", st.ID, st)
			}
		}
		t.Logf("observed: worker namespace cannot reach s%d:2181 but reaches the others; all servers keep serving the harness", cut)
		if strings.HasPrefix(h.session().Server, lockservice.ServerAddr(cut).String()+":") {
			if _, ok := h.waitFor(3*testSessionTimeout, func(m helperMsg) bool {
				return m.State == "StateHasSession" && !strings.HasPrefix(m.Server, lockservice.ServerAddr(cut).String()+":")
			}); !ok {
				t.Fatalf("worker on s%d did not fail over: %v", cut, h.states())
			}
			t.Logf("observed: the worker was on s%d and failed over: %v", cut, h.states())
		}
		if err := a.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		if !reach(cut) {
			t.Fatalf("s%d unreachable after undo", cut)
		}
		e.assertHealed(t)
	})

	t.Run("schedule and HealAll", func(t *testing.T) {
		for slot := 6; slot <= 7; slot++ {
			e.worker(t, slot, testSessionTimeout, slot > 6)
		}
		var mu sync.Mutex
		var events []nemesis.Event
		// Seed 20 picks 9 of the 10 classes in the first 15 s.
		nem, err := nemesis.New(nemesis.Schedule{Classes: nemesis.Classes(), Interval: 300 * time.Millisecond,
			SessionTimeout: testSessionTimeout, Seed: 20}, c, func(ev nemesis.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
			t.Logf("event %s %s %v %s", ev.Phase, ev.Fault, ev.Value, ev.Err)
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- nem.Run(ctx) }()
		time.Sleep(15 * time.Second)
		if err := nem.HealAll(ctx); err != nil {
			t.Fatalf("HealAll: %v", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after HealAll")
		}
		if err := nem.HealAll(ctx); err != nil {
			t.Fatalf("second HealAll: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		classes := map[nemesis.Class]bool{}
		if len(events) < 2 || len(events)%2 != 0 {
			t.Fatalf("%d events", len(events))
		}
		for i := 0; i < len(events); i += 2 {
			if events[i].Phase != nemesis.PhaseStart || events[i+1].Phase != nemesis.PhaseStop || events[i].Fault != events[i+1].Fault {
				t.Fatalf("events %d, %d are not a start and its stop: %+v %+v", i, i+1, events[i], events[i+1])
			}
			if strings.Contains(events[i+1].Err, "undo:") {
				t.Errorf("undo failed: %+v", events[i+1])
			}
			classes[events[i].Fault] = true
		}
		for _, s := range e.ens.Servers {
			if pid := s.Host.Pid(); pid != 0 && procState(pid) == "T" {
				t.Fatalf("s%d still stopped", s.ID)
			}
		}
		e.mu.Lock()
		for _, h := range e.clients {
			if h.alive() && h.state() == "T" {
				t.Errorf("worker %d still stopped", h.pid)
			}
		}
		e.mu.Unlock()
		t.Logf("observed: %d faults of %d classes in 15 s, all healed", len(events)/2, len(classes))
		e.assertHealed(t)
	})

	t.Run("HealAll removes stray faults", func(t *testing.T) {
		// Faults applied outside the schedule (as after a crash of the runner):
		// HealAll's belt and braces finds them by name and by process.
		h := e.worker(t, 6, testSessionTimeout, false)
		if _, err := (nemesis.Partition{Shape: nemesis.Halves}).Apply(ctx, c, rng); err != nil {
			t.Fatal(err)
		}
		if _, err := (nemesis.ClientPartition{}).Apply(ctx, c, rng); err != nil {
			t.Fatal(err)
		}
		p, err := nemesis.Pause{Target: nemesis.TargetOne}.Apply(ctx, c, rng)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (nemesis.ClientPause{}).Apply(ctx, c, rng); err != nil {
			t.Fatal(err)
		}
		nem, err := nemesis.New(nemesis.Schedule{}, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := nem.HealAll(ctx); err != nil {
			t.Fatal(err)
		}
		for _, pid := range p.Value["pids"].(map[string]int) {
			if procState(pid) == "T" {
				t.Fatalf("server pid %d still stopped", pid)
			}
		}
		if h.state() == "T" {
			t.Fatal("worker still stopped")
		}
		t.Logf("observed: a fresh nemesis's HealAll removed stray partition tables and resumed stopped processes")
		e.assertHealed(t)
	})
}
