package simsched

import (
	"context"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes"
)

// HarnessLocker adapts one of the harness's recipes to a simulator's Locker,
// whose Hold is H: an acquire's hold is H's zero value.
type HarnessLocker[H any] struct{ R recipes.Recipe }

// Acquire acquires the lock until ctx ends.
func (h HarnessLocker[H]) Acquire(ctx context.Context) (H, error) {
	var hold H
	_, err := h.R.Acquire(ctx, recipes.AcquireRequest{})
	return hold, err
}

// Release releases the lock.
func (h HarnessLocker[H]) Release() error { return h.R.Release(context.Background()) }

// Close closes the recipe.
func (h HarnessLocker[H]) Close() { _ = h.R.Close() }

// LostEvents passes a harness recipe's lost events on to onLost.
type LostEvents struct{ OnLost func(reason string) }

var _ recipes.Events = LostEvents{}

// Lost calls OnLost.
func (e LostEvents) Lost(reason string) { e.OnLost(reason) }

// Session does nothing.
func (e LostEvents) Session(int64, []byte) {}

// Renewed does nothing.
func (e LostEvents) Renewed() {}

// LogWriter sends a recipe's log lines to Logf, one call a write, without the
// final newline.
type LogWriter struct {
	Logf func(format string, args ...any)
}

// Write implements io.Writer.
func (w LogWriter) Write(b []byte) (int, error) {
	w.Logf("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
