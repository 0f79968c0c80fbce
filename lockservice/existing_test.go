package lockservice

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

// An existing deployment's server is never started, killed or signalled, and the
// nemesis's heal finds nothing of its own there.
func TestExistingHostTouchesNothing(t *testing.T) {
	h := NewExistingHost("zk1:2181", netip.MustParseAddrPort("192.0.2.1:2181"))
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

// TestParseHostPorts: the default port fills a missing one; an empty address, a bad
// port and a loopback address are refused, naming the address.
func TestParseHostPorts(t *testing.T) {
	got, err := ParseHostPorts("10.0.0.1,10.0.0.2:7000, db.example:6380", 6379)
	if want := []string{"10.0.0.1:6379", "10.0.0.2:7000", "db.example:6380"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseHostPorts = %v, %v; want %v", got, err, want)
	}
	for in, want := range map[string]string{"10.0.0.1,,x": "empty address", "h:99999": "bad port", "127.0.0.1:6379": "loopback", "localhost": "loopback"} {
		if _, err := ParseHostPorts(in, 6379); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHostPorts(%q) = %v, want an error with %q", in, err, want)
		}
	}
}
