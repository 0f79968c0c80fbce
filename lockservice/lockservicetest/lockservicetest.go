// Package lockservicetest holds what the lock services' tests share, as
// net/http/httptest does for HTTP: the address a test's worker takes on a run's
// network, and the checks the kinds' inspector tests make alike.
package lockservicetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// WorkerAddr is a worker's address for a test on a run's network: 10.77.1.100, on
// the servers' network and no server's.
var WorkerAddr = lockservice.ServerAddr(100)

// CheckLive fails t unless every session is in alive (a LiveSessions answer).
func CheckLive(t testing.TB, alive map[string]bool, sessions ...string) {
	t.Helper()
	for _, s := range sessions {
		if !alive[s] {
			t.Errorf("LiveSessions lacks %s: %v", s, alive)
		}
	}
}

// WaitLive waits up to 5 s until live(ctx)[session] is want.
func WaitLive(t testing.TB, live func(context.Context) map[string]bool, session string, want bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if live(context.Background())[session] == want {
			return
		}
	}
	t.Errorf("session %s live is not %v", session, want)
}

// Fixture is a lock service started for a test: its servers, the run network they
// are on (and the run id naming its namespaces), and the directory of their files.
// Start makes it; the test's end tears it down and checks that no namespace of it is
// left.
type Fixture struct {
	Service lockservice.Service
	Net     *netns.Network
	RunID   string
	Dir     string
}

// Start starts the servers cfg asks for (any kind whose package the test links; its
// Dir, when empty, a fresh directory that every account can enter, as a database
// server's must be) on a fresh run network, and stops them, destroys the network and
// checks that none of its namespaces is left when the test ends. A server that did
// not start fails the test.
func Start(t testing.TB, cfg lockservice.Config) *Fixture {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = OpenDir(t)
	}
	n, id := Net(t)
	svc, err := lockservice.Start(context.Background(), n, cfg, id)
	if svc != nil {
		t.Cleanup(func() {
			if err := svc.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return &Fixture{Service: svc, Net: n, RunID: id, Dir: cfg.Dir}
}

// Net is a fresh run network for a test (and its run id), destroyed at the test's end, which then
// checks that none of its namespaces is left.
func Net(t testing.TB) (n *netns.Network, runID string) {
	t.Helper()
	id := "t" + netns.RandomID()[:4]
	n, err := netns.Create(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Destroy(); err != nil {
			t.Error(err)
		}
		names, _ := netns.List()
		for _, name := range names {
			if strings.HasPrefix(name, netns.Prefix+id) {
				t.Errorf("namespace left behind: %s", name)
			}
		}
	})
	return n, id
}

// Worker adds a worker's namespace to the fixture's network, at WorkerAddr.
func (f *Fixture) Worker(t testing.TB) netns.Host {
	t.Helper()
	w, err := f.Net.AddHost(context.Background(), "w1", WorkerAddr)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// OpenDir is a fresh directory for a test that every account can enter (a database
// server runs as its own), removed at the test's end.
func OpenDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
