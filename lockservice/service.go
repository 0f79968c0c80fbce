package lockservice

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Service is a running lock service as a run sees it.
type Service interface {
	// Connect is what a worker is told to connect to (ZooKeeper: host:port,...).
	Connect() string
	// Nodes are the servers as the nemesis addresses them.
	Nodes() []nemesis.Server
	// Leader is the server that leads now, if the service has one and it answers.
	Leader(ctx context.Context) (id int, ok bool)
	// ServerOf is the server a client (its address and session id) is connected to.
	ServerOf(ctx context.Context, addr netip.Addr, session string) (id int, ok bool)
	// Dial opens a connection from the harness to a server's address.
	Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error)
	// WaitServing waits until every server serves (bounded by timeout); the error
	// says which do not and why.
	WaitServing(ctx context.Context, timeout time.Duration) error
	// Version is what the servers say they run ("" when none answers).
	Version(ctx context.Context) string
	// Managed is false for a deployment the tool reaches but does not run (its
	// servers are started, stopped and changed by nobody but their owners).
	Managed() bool
	// Close stops the servers the tool started and removes what it made for them.
	Close() error
}

// Failover is a failover the servers made on their own (Redis's sentinels promoting
// a replica, a Redis Cluster's replica promoting itself), as a watch of them saw
// it: its start, then its stop, the time between being when the servers may have
// had two primaries (or named another to some clients than to others). The run
// records both in the history as a "failover" fault's, so that the cause rule
// reads it as it reads the nemesis's own.
type Failover struct {
	// Stop is false for the start (a failover seen under way) and true for its end
	// (the servers name another primary, Promoted, or gave it up, Aborted).
	Stop bool
	// By is what made it: "sentinel" (Redis's sentinels), "cluster" (a Redis
	// Cluster's own election, of the primary of the run's lock key's slot).
	By string
	// Primary is the server it replaces ("s1"); Promoted the one promoted (at the
	// stop, "" if none was).
	Primary, Promoted string
	// Primaries are the servers that served as a primary while it was in force
	// (at the stop): more than one, and two clients may each have been granted
	// the same lock.
	Primaries []string
	// Aborted says the failover ended with the primary unchanged and no second
	// primary seen: it lost nothing.
	Aborted bool
	// Persistence is the servers' persistence setting (what a restarted primary kept).
	Persistence string
}
