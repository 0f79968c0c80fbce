package sqldb

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Linux's TCP keepalive defaults (net.ipv4.tcp_keepalive_time, _intvl, _probes): what
// a database server uses when its own keepalive settings are 0, as they are by
// default on PostgreSQL and MariaDB.
const (
	kernelKeepAliveIdle     = 7200 * time.Second
	kernelKeepAliveInterval = 75 * time.Second
	kernelKeepAliveProbes   = 9
)

// KeepAlive is how a database server gives up on a client whose host vanished without
// closing its connection (a power cut, a kernel panic: nemesis client-vanish), which
// is the only thing that ends such a session, and with it the session's advisory or
// GET_LOCK locks. An idle connection: after Idle seconds without a packet the server
// probes the client Probes times, Interval seconds apart (TCP keepalive). A
// connection with a reply unacknowledged (the client vanished while the server
// answered it): after Retries retransmissions (the server host's
// net.ipv4.tcp_retries2; PostgreSQL's tcp_user_timeout too). Zero values leave both
// to the kernel: 2 h 11 min idle, about 15 min with data in flight.
type KeepAlive struct {
	Idle, Interval, Probes int
	// Retries is net.ipv4.tcp_retries2 in the server's namespace (0: the kernel's 15).
	Retries int
}

// DBKeepAlive is the keepalive that gives up on a vanished client about d after its
// last packet: Idle and Interval each a third of d (whole seconds, at least 1) and 2
// probes. d <= 0 is the zero KeepAlive (the kernel's defaults).
func DBKeepAlive(d time.Duration) KeepAlive {
	if d <= 0 {
		return KeepAlive{}
	}
	s := max(1, int((d/3+time.Second/2)/time.Second))
	// Retransmissions wait 200 ms, doubling: the server gives up about 0.2 s x
	// (2^(n+1) - 1) after the first of n.
	retries := max(1, int(math.Log2(d.Seconds()/0.2+1))-1)
	return KeepAlive{Idle: s, Interval: s, Probes: 2, Retries: retries}
}

// UserTimeout is PostgreSQL's tcp_user_timeout for k: how long data may stay
// unacknowledged, the same bound (0: the kernel's).
func (k KeepAlive) UserTimeout() time.Duration {
	if !k.Set() {
		return 0
	}
	return k.Bound()
}

// applyRetries sets net.ipv4.tcp_retries2 in a server's namespace ns when k says.
func (k KeepAlive) applyRetries(ctx context.Context, ns string) error {
	if k.Retries == 0 {
		return nil
	}
	if _, err := netns.Exec(ctx, ns, nil, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2="+strconv.Itoa(k.Retries)); err != nil {
		return fmt.Errorf("%s: net.ipv4.tcp_retries2: %w", ns, err)
	}
	return nil
}

// Set reports whether k sets the server's keepalive (else the kernel's applies).
func (k KeepAlive) Set() bool { return k.Idle > 0 }

// Bound is how long after a vanished client's last packet the server ends its session.
func (k KeepAlive) Bound() time.Duration {
	if !k.Set() {
		return kernelKeepAliveIdle + kernelKeepAliveProbes*kernelKeepAliveInterval
	}
	return time.Duration(k.Idle+k.Probes*k.Interval) * time.Second
}

// confLines are k's settings in a server's configuration, "name = value" with the
// kind's names (dbLayout.keepAlive); none when k leaves them to the kernel.
func (k KeepAlive) confLines(names []string) []string {
	if !k.Set() {
		return nil
	}
	values := []int64{int64(k.Idle), int64(k.Interval), int64(k.Probes), k.UserTimeout().Milliseconds()}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%s = %d", n, values[i])
	}
	return out
}

// keepAliveSetting names the settings that bound how long a server laid out as l
// keeps a vanished client's session, with their value now (k): what a finding's fix
// says.
func keepAliveSetting(l dbLayout, k KeepAlive) string {
	names := strings.Join(l.keepAlive[:len(l.keepAlive)-1], ", ") + " and " + l.keepAlive[len(l.keepAlive)-1]
	now := fmt.Sprintf("now %d s, %d s and %d probes, %d retransmissions: about %s", k.Idle, k.Interval, k.Probes, k.Retries, k.Bound())
	if !k.Set() {
		now = fmt.Sprintf("now the kernel's: %s idle, %d probes %s apart, 15 retransmissions: %s for an idle session, about 15 min for one the server was answering",
			kernelKeepAliveIdle, kernelKeepAliveProbes, kernelKeepAliveInterval, k.Bound())
	}
	return fmt.Sprintf("%s's %s, and the server host's net.ipv4.tcp_retries2 (%s; zlockcheck --db-keepalive sets them)", l.kind.Title(), names, now)
}
