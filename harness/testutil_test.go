package harness

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// requireIntegration skips tests that need root, network namespaces and ZooKeeper,
// unless ZLC_REQUIRE_INTEGRATION is set (as in CI), where their absence is a failure.
func requireIntegration(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		missing = append(missing, "Debian's zookeeper package")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "iproute2")
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("ZLC_REQUIRE_INTEGRATION") != "" {
		t.Fatalf("integration test needs %s", strings.Join(missing, ", "))
	}
	t.Skipf("integration test needs %s (run make test)", strings.Join(missing, ", "))
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
