package zookeeper

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testenv/leftover"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

func TestEnsembleStartsAndServes(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.IPRoute2)
	for _, nodes := range []int{3, 5} {
		ctx := context.Background()
		net, err := netns.Create(ctx, "t"+netns.RandomID()[:4])
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		e, err := StartEnsemble(ctx, net, EnsembleConfig{Nodes: nodes, Dir: t.TempDir()})
		if err != nil {
			net.Destroy()
			t.Fatal(err)
		}
		t.Logf("%d nodes serving after %s", nodes, time.Since(start))
		leaders := 0
		for _, st := range e.Statuses(ctx) {
			if !st.Serving() {
				t.Errorf("server %d not serving: %+v", st.ID, st)
			}
			if st.Mode == "leader" {
				leaders++
			}
		}
		if leaders != 1 {
			t.Errorf("want exactly one leader, got %d", leaders)
		}
		e.Stop()
		if err := net.Destroy(); err != nil {
			t.Fatal(err)
		}
		leftover.Assert(t)
	}
}

// TestEnsembleFromZKHome lays Debian's ZooKeeper jars out as a release tarball does
// (DIR/*.jar, DIR/lib/*.jar) and starts an ensemble from it with ZKHome.
func TestEnsembleFromZKHome(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.IPRoute2)
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/share/java/zookeeper.jar", filepath.Join(home, "zookeeper-3.8.jar")); err != nil {
		t.Fatal(err)
	}
	// The dependencies zookeeper.jar's manifest names, and a logging backend.
	deps := []string{"zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-buffer", "netty-common", "netty-handler",
		"netty-transport", "netty-transport-native-epoll", "netty-codec", "netty-resolver", "commons-cli", "commons-io",
		"jackson-core", "jackson-databind", "jackson-annotations", "metrics-core", "snappy-java"}
	for _, d := range deps {
		src := "/usr/share/java/" + d + ".jar"
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := os.Symlink(src, filepath.Join(home, "lib", d+".jar")); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	e := startTestEnsemble(t, EnsembleConfig{Nodes: 3, Dir: t.TempDir(), ZKHome: home})
	if v := e.Version(ctx); !strings.HasPrefix(v, "3.") {
		t.Errorf("version %q", v)
	}
	if _, err := (&EnsembleConfig{ZKHome: t.TempDir()}).classpath(context.Background(), localFiles{}); err == nil {
		t.Error("an empty --zk-home was accepted")
	}
}

// startTestEnsemble starts cfg's ensemble in a network of its own; the test's
// cleanup stops it and removes the network.
func startTestEnsemble(t *testing.T, cfg EnsembleConfig) *Ensemble {
	t.Helper()
	ctx := context.Background()
	net, err := netns.Create(ctx, "t"+netns.RandomID()[:4])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := net.Destroy(); err != nil {
			t.Error(err)
		}
	})
	e, err := StartEnsemble(ctx, net, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// TestEnsembleFromRelease starts a 3-server ensemble of every release --zk-version
// takes, from the jars fetched into the cache ($ZLC_CACHE_DIR or the user's: make
// setup fetched them; else this fetches them from Maven Central), and asks each which
// version it runs.
func TestEnsembleFromRelease(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.IPRoute2)
	ctx := context.Background()
	for _, v := range Releases() {
		t.Run(v, func(t *testing.T) {
			e := startTestEnsemble(t, EnsembleConfig{Nodes: 3, Dir: t.TempDir(), Release: v, CacheDir: os.Getenv("ZLC_CACHE_DIR")})
			if got := e.Version(ctx); !strings.HasPrefix(got, v+"-") {
				t.Errorf("the servers of release %s say they run %q", v, got)
			}
		})
	}
}

// forceSync=no is written only when asked for.
func TestServerConfigForceSync(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		dir := t.TempDir()
		s := &Server{Member: lockservice.Member{ID: 1, Dir: dir, Conf: dir + "/zoo.cfg"}}
		cfg := EnsembleConfig{Nodes: 1, Tick: 200e6, InitLimit: 10, SyncLimit: 5, MaxSessionTimeout: 60e9, NoForceSync: noSync}
		if err := writeServerFiles(s, cfg, nil); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(s.Conf)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(data), "forceSync=no"); got != noSync {
			t.Errorf("NoForceSync=%v: zoo.cfg has forceSync=no: %v\n%s", noSync, got, data)
		}
	}
}

// Members decides the roles once: the servers after Nodes observe; every server's
// zoo.cfg names the observers, and an observer's says peerType=observer.
func TestObserverConfig(t *testing.T) {
	cfg := EnsembleConfig{Nodes: 3, Observers: 2, Tick: 200e6, InitLimit: 10, SyncLimit: 5, MaxSessionTimeout: 60e9}
	members := cfg.Members()
	if len(members) != 5 || members[2].Role != Participant || members[3].Role != Observer || members[4] != (Member{ID: 5, Role: Observer}) {
		t.Fatalf("members %v", members)
	}
	addrs := make([]netip.Addr, len(members))
	for i, m := range members {
		addrs[i] = lockservice.ServerAddr(m.ID)
	}
	peers := peerLines(members, addrs)
	for _, m := range []Member{members[0], members[4]} {
		dir := t.TempDir()
		s := &Server{Member: lockservice.Member{ID: m.ID, Dir: dir, Conf: dir + "/zoo.cfg"}, Role: m.Role}
		if err := writeServerFiles(s, cfg, peers); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(s.Conf)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if !strings.Contains(text, "server.3=10.77.1.3:2888:3888\n") || !strings.Contains(text, "server.5=10.77.1.5:2888:3888:observer\n") {
			t.Errorf("server %d's zoo.cfg lacks the roles:\n%s", m.ID, text)
		}
		if got := strings.Contains(text, "peerType=observer"); got != (m.Role == Observer) {
			t.Errorf("server %d (%s): peerType=observer %v\n%s", m.ID, m.Role, got, text)
		}
	}
	for _, bad := range []EnsembleConfig{{Nodes: 3, Observers: -1}, {Nodes: 0, Observers: 2}, {Nodes: 5, Observers: 5}} {
		if err := bad.validate(); err == nil {
			t.Errorf("%d nodes, %d observers: no error", bad.Nodes, bad.Observers)
		}
	}
}
