package tcprun

import (
	"context"
	"os"
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
		return []string{"/usr/bin/python3", filepath.Join(root, "recipes/kazoo/kazoo_worker.py"), recipe}
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

func TestExploreTCP(t *testing.T) {
	if os.Getenv("ZLC_TCP_EXPLORE") == "" {
		t.Skip("exploration")
	}
	for _, recipe := range []string{"kazoo-lock", "curator-mutex"} {
		for _, faults := range []zksim.ServerConfig{
			{LoseReply: 0.05, Drop: 0.03, Stall: 0.01},
			{LoseReply: 0.02, Drop: 0.02, Stall: 0.03, ExpireStalled: 1},
		} {
			faults.Listen, faults.Seed = "127.0.0.1:0", 1
			srv, err := zksim.StartServer(faults)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), Config{Argv: workerArgv(t, recipe), Connect: srv.Addr(), Workers: 3,
				Duration: 20 * time.Second, SessionTimeout: 3 * time.Second, HoldMax: 200 * time.Millisecond,
				AcquireTimeout: 5 * time.Second, Path: "/zlc/lock", Seed: 1})
			srv.Close()
			t.Logf("%s %+v: err %v, %d ops, %d acquired, %d retired, faults %v, verdict %s", recipe, faults, err, len(res.History), res.Acquired, res.Retired, srv.Faults(), res.Check.Verdict)
			if res.Check.Verdict != models.Valid {
				for _, k := range res.Check.Keys {
					t.Logf("  %s", k.Witness)
				}
			}
		}
	}
}
