package harness

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// requireIntegration skips tests that need root, network namespaces and ZooKeeper
// (fails under ZLC_REQUIRE_INTEGRATION, see testenv).
func requireIntegration(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.IPRoute2)
}

// assertNothingLeft fails if any zlc namespace or ZooKeeper process remains.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	names, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > 0 {
		t.Errorf("namespaces left behind: %v", names)
	}
	out, _ := exec.Command("pgrep", "-f", "QuorumPeerMain").Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("ZooKeeper processes left behind: %s", s)
	}
}
