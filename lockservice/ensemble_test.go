package lockservice

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testenv/leftover"
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
	net, err := netns.Create(ctx, "t"+netns.RandomID()[:4])
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := net.Destroy(); err != nil {
			t.Error(err)
		}
	}()
	e, err := StartEnsemble(ctx, net, EnsembleConfig{Nodes: 3, Dir: t.TempDir(), ZKHome: home})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if v := e.Version(ctx); !strings.HasPrefix(v, "3.") {
		t.Errorf("version %q", v)
	}
	if _, err := (&EnsembleConfig{ZKHome: t.TempDir()}).classpath(context.Background(), localFiles{}); err == nil {
		t.Error("an empty --zk-home was accepted")
	}
}

// forceSync=no is written only when asked for.
func TestServerConfigForceSync(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		dir := t.TempDir()
		s := &Server{ID: 1, Dir: dir, Cfg: dir + "/zoo.cfg"}
		cfg := EnsembleConfig{Nodes: 1, Tick: 200e6, InitLimit: 10, SyncLimit: 5, MaxSessionTimeout: 60e9, NoForceSync: noSync}
		if err := writeServerFiles(s, cfg, nil); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(s.Cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(data), "forceSync=no"); got != noSync {
			t.Errorf("NoForceSync=%v: zoo.cfg has forceSync=no: %v\n%s", noSync, got, data)
		}
	}
}
