package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

var (
	_ Fault = (*ConnectionReset)(nil)
	_ fault = (*ConnectionReset)(nil)
)

// tableReset is connection-reset's table in a worker's namespace: it black-holes the
// worker's connections to the servers until they are reset.
const tableReset = "reset"

// ResetFraction is how long, as a fraction of the session timeout, a connection reset
// keeps the worker's connections silent before resetting them (unless
// Schedule.ClientHold says): long enough that a holder cut off mid-hold has sent its
// release into the silence (explore's holds are 100 ms at most), far from the session
// timeout, so the client's immediate reconnect finds its session alive whatever its
// read timeout and its reconnect pacing.
const ResetFraction = 0.25

// ConnectionReset silences one worker's TCP connections to the servers (table
// zlc_reset in its namespace drops their packets both ways, by local port), then, at
// the undo, resets them: it destroys their sockets in the worker's namespace (ss -K)
// before deleting the table. The worker's client sees a connection loss only then,
// and at once; what it sent during the silence (a release's delete) never reached a
// server and never will (the kernel's retransmissions died with the socket), and its
// reconnect, a new connection the table does not match, finds its session alive. A
// middlebox that drops a flow and then resets it. Unlike client-partition held
// shorter than a session, where the client drops the connection itself after its read
// timeout and the kernel may still retransmit the request after the heal, the request
// is lost for certain.
type ConnectionReset struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply silences the target worker's connections to the servers.
func (f ConnectionReset) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ConnectionReset) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	cl, picked, err := pickClient(ctx, c, f.Target, f.HolderWait, rng)
	v := clientValue(string(ClassConnectionReset), f.Target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	ns := workerNet(cl.Netns)
	servers := serverAddrs(c)
	var ports []int
	apply := func(ctx context.Context) error {
		p, err := serverConnPorts(ctx, ns, servers)
		if err != nil {
			return fmt.Errorf("connection-reset: %w", err)
		}
		ports = p
		v["ports"] = ports
		if len(ports) == 0 {
			return nil
		}
		return nftReplace(ctx, ns, tableReset, vanishChains(ports)...)
	}
	undo := func(ctx context.Context) error {
		if len(ports) > 0 {
			if _, err := ns.Exec(ctx, nil, destroyArgv(ports)...); err != nil && !errors.Is(err, ErrHostGone) {
				return fmt.Errorf("connection-reset: destroying worker %d's sockets: %w", cl.Process, err)
			}
			ports = nil // a second undo must not reset a new connection on a reused port
		}
		return nftDelete(ctx, ns, tableReset)
	}
	return plan{value: v, nets: []netHost{ns}, apply: apply, undo: undo}, nil
}
