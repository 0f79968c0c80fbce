package zookeeper

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

// An existing ensemble's server is never started, killed or signalled, and the
// nemesis's heal finds nothing of its own there.
func TestExistingHostTouchesNothing(t *testing.T) {
	h := existingHost{name: "zk1:2181"}
	ctx := context.Background()
	if err := h.Start(ctx); err == nil {
		t.Error("Start succeeded on an existing server")
	}
	if err := h.Kill(ctx); err != nil {
		t.Errorf("Kill: %v (must be a no-op)", err)
	}
	if err := h.Signal(ctx, syscall.SIGSTOP); !errors.Is(err, nemesis.ErrNotRunning) {
		t.Errorf("Signal: %v, want ErrNotRunning", err)
	}
	if _, err := h.Exec(ctx, nil, "nft", "list", "tables"); !errors.Is(err, nemesis.ErrHostGone) {
		t.Errorf("Exec: %v, want ErrHostGone", err)
	}
}
