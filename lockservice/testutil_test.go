package lockservice

import (
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testenv/leftover"
)

// requireIntegration skips tests that need root, network namespaces and ZooKeeper
// (fails under ZLC_REQUIRE_INTEGRATION, see testenv).
func requireIntegration(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.IPRoute2)
}

// assertNothingLeft fails if any zlc namespace or ZooKeeper process remains.
func assertNothingLeft(t *testing.T) { t.Helper(); leftover.Assert(t) }
