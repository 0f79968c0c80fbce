// Package lockservicetest holds what the lock services' tests share, as
// net/http/httptest does for HTTP: the address a test's worker takes on a run's
// network, and the checks the kinds' inspector tests make alike.
package lockservicetest

import (
	"context"
	"testing"
	"time"

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
