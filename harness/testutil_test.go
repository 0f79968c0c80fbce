package harness

import (
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// requireIntegration skips tests that need root, network namespaces and ZooKeeper
// (fails under ZLC_REQUIRE_INTEGRATION, see testenv).
func requireIntegration(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.IPRoute2)
}
