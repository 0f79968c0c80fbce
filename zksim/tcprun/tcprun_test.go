package tcprun

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/zksim"
)

// workerArgv builds the Curator worker (or takes the Kazoo one) for recipe.
func workerArgv(t *testing.T, recipe string) []string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	switch recipe {
	case "kazoo-lock":
		testenv.RequireIntegration(t, testenv.Kazoo)
		return []string{"/usr/bin/python3", filepath.Join(root, "recipes/python/kazoo_worker.py"), recipe}
	case "curator-mutex":
		testenv.RequireIntegration(t, testenv.JDK, testenv.Curator)
		dir := filepath.Join(t.TempDir(), "curator")
		if out, err := exec.Command("sh", filepath.Join(root, "recipes/curator/build.sh"), dir).CombinedOutput(); err != nil {
			t.Fatalf("build the Curator worker: %v\n%s", err, out)
		}
		return []string{filepath.Join(root, "recipes/curator/run.sh"), dir, recipe}
	}
	t.Fatalf("no worker for %s", recipe)
	return nil
}

// TestCuratorAndKazooUnderFaults: Curator's InterProcessMutex and Kazoo's Lock,
// through their workers, against the TCP simulator losing replies, dropping
// requests and stalling connections (no expiry): mutual exclusion holds, and the run
// exercised something (acquires, and faults injected).
func TestCuratorAndKazooUnderFaults(t *testing.T) {
	// Curator is slow to come back from a broken connection (its retry policy
	// backs off, and a retired worker is a new JVM), so it gets milder rates and more
	// time: at 5% lost replies it once made no acquire in 10 s.
	cases := []struct {
		recipe string
		faults zksim.ServerConfig
		time   time.Duration
	}{
		{"kazoo-lock", zksim.ServerConfig{LoseReply: 0.05, Drop: 0.03, Stall: 0.02}, 10 * time.Second},
		{"curator-mutex", zksim.ServerConfig{LoseReply: 0.02, Drop: 0.01, Stall: 0.01}, 20 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.recipe, func(t *testing.T) {
			argv := workerArgv(t, tc.recipe)
			faults := tc.faults
			faults.Listen, faults.Seed = "127.0.0.1:0", 1
			srv, err := zksim.StartServer(faults)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			res, err := Run(context.Background(), Config{Argv: argv, Connect: srv.Addr(), Workers: 3,
				Duration: tc.time, SessionTimeout: 3 * time.Second, HoldMax: 200 * time.Millisecond,
				AcquireTimeout: 5 * time.Second, Path: "/zlc/lock", Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			injected := srv.Faults()
			t.Logf("%d ops, %d acquired, %d retired, faults %v: %s", len(res.History), res.Acquired, res.Retired, injected, res.Check.Verdict)
			if res.Check.Verdict != models.Valid {
				for _, k := range res.Check.Keys {
					t.Errorf("%s: %s", res.Check.Verdict, k.Witness)
				}
			}
			if res.Acquired == 0 || injected["lose-reply"]+injected["drop"]+injected["stall"] == 0 {
				t.Errorf("the run exercised nothing: %d acquires, faults %v", res.Acquired, injected)
			}
		})
	}
}

// TestServerConfigValidate: rates outside [0, 1] and a missing address are refused.
func TestServerConfigValidate(t *testing.T) {
	for _, c := range []zksim.ServerConfig{{}, {Listen: "127.0.0.1:0", Drop: -0.1}, {Listen: "127.0.0.1:0", ExpireStalled: 1.5}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (zksim.ServerConfig{Listen: "127.0.0.1:0", Stall: 1}).Validate(); err != nil {
		t.Error(err)
	}
}
