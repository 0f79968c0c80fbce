// Package leftover checks, at the end of a test, that nothing a run makes on the host
// (zlc namespaces, ZooKeeper processes) was left behind.
package leftover

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Assert fails t if any zlc namespace or ZooKeeper process remains.
func Assert(t testing.TB) {
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
