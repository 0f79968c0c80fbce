package netns

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root)
}

func TestNetworkConnectsHostsAndCleansUp(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	n, err := Create(ctx, "tn01")
	if err != nil {
		t.Fatal(err)
	}
	a, err := n.AddHost(ctx, "a", netip.MustParseAddr("10.77.9.1"))
	if err != nil {
		n.Destroy()
		t.Fatal(err)
	}
	if _, err := n.AddHost(ctx, "b", netip.MustParseAddr("10.77.9.2")); err != nil {
		n.Destroy()
		t.Fatal(err)
	}
	// a reaches b across the bridge (ping needs no extra package: use ip's own neigh
	// resolution through a TCP connect to a closed port, which answers RST).
	out, err := a.Run(ctx, "bash", "-c", "echo > /dev/tcp/10.77.9.2/9 2>&1; ip neigh show 10.77.9.2")
	if !strings.Contains(string(out), "lladdr") {
		t.Errorf("a cannot reach b: %v: %s", err, out)
	}
	// The host's own namespace gained no link.
	links, _ := exec.Command("ip", "-o", "link").Output()
	if strings.Contains(string(links), "zlc") {
		t.Errorf("zlc link in the host namespace:\n%s", links)
	}
	if _, err := os.Stat(ownerFile("tn01")); err != nil {
		t.Errorf("no owner file while the run is alive: %v", err)
	}
	// A live run is spared by cleanup.
	rep, err := CleanupAll(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range rep.Namespaces {
		if strings.HasPrefix(ns, "zlctn01") {
			t.Errorf("cleanup removed namespace %s of a live run", ns)
		}
	}
	// A process left inside dies with Destroy.
	sleeper := a.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.Destroy(); err != nil {
		t.Fatal(err)
	}
	_ = sleeper.Wait()
	if sleeper.ProcessState == nil || sleeper.ProcessState.Success() {
		t.Error("process inside the namespace survived Destroy")
	}
	names, _ := List()
	for _, ns := range names {
		if strings.HasPrefix(ns, "zlctn01") {
			t.Errorf("namespace %s left after Destroy", ns)
		}
	}
	if _, err := os.Stat(ownerFile("tn01")); err == nil {
		t.Error("owner file left after Destroy")
	}
}

func TestExecRefusesForeignNamespaces(t *testing.T) {
	if _, err := Exec(context.Background(), "somebody-elses", nil, "true"); err == nil || !strings.Contains(err.Error(), "not made by zlockcheck") {
		t.Errorf("Exec in a foreign namespace: %v", err)
	}
}
