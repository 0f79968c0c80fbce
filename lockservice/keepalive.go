package lockservice

import (
	"fmt"
	"time"
)

// Linux's TCP keepalive defaults (net.ipv4.tcp_keepalive_time, _intvl, _probes): what
// a database server uses when its own keepalive settings are 0, as they are by
// default on PostgreSQL and MariaDB.
const (
	kernelKeepAliveIdle     = 7200 * time.Second
	kernelKeepAliveInterval = 75 * time.Second
	kernelKeepAliveProbes   = 9
)

// KeepAlive is a database server's TCP keepalive: after Idle seconds without a packet
// from a client, the server probes it Probes times, Interval seconds apart, and then
// ends its session. That is the only thing that ends the session of a client whose
// host vanished without closing its connection (a power cut, a kernel panic: nemesis
// client-vanish), and with it the session's advisory or GET_LOCK locks. Zero values
// leave it to the kernel (2 h 11 min).
type KeepAlive struct {
	Idle, Interval, Probes int
}

// DBKeepAlive is the keepalive that gives up on a vanished client about d after its
// last packet: Idle and Interval each a third of d (whole seconds, at least 1) and 2
// probes. d <= 0 is the zero KeepAlive (the kernel's defaults).
func DBKeepAlive(d time.Duration) KeepAlive {
	if d <= 0 {
		return KeepAlive{}
	}
	s := max(1, int((d/3+time.Second/2)/time.Second))
	return KeepAlive{Idle: s, Interval: s, Probes: 2}
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

// keepAliveSetting names the settings that bound how long kind's server keeps a
// vanished client's session, with their value now (k): what a finding's fix says.
func keepAliveSetting(kind Kind, k KeepAlive) string {
	names := map[Kind]string{
		KindPostgres: "PostgreSQL's tcp_keepalives_idle, tcp_keepalives_interval and tcp_keepalives_count",
		KindMariaDB:  "MariaDB's tcp_keepalive_time, tcp_keepalive_interval and tcp_keepalive_probes",
	}
	now := fmt.Sprintf("now %d s, %d s and %d probes: %s", k.Idle, k.Interval, k.Probes, k.Bound())
	if !k.Set() {
		now = fmt.Sprintf("now 0, the kernel's %s, %s and %d probes: %s", kernelKeepAliveIdle, kernelKeepAliveInterval, kernelKeepAliveProbes, k.Bound())
	}
	return fmt.Sprintf("%s (%s; zlockcheck --db-keepalive sets them)", names[kind], now)
}

// VanishedClientKept says what bounds how long a PostgreSQL server keeps the session
// of a client that vanished (nemesis.SessionKeeper).
func (p *Postgres) VanishedClientKept() string {
	return keepAliveSetting(KindPostgres, DBKeepAlive(p.cfg.KeepAlive))
}

// VanishedClientKept says what bounds how long a MariaDB server keeps the connection
// of a client that vanished (nemesis.SessionKeeper).
func (m *MariaDB) VanishedClientKept() string {
	return keepAliveSetting(KindMariaDB, DBKeepAlive(m.cfg.KeepAlive))
}
