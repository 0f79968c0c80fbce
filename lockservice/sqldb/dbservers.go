package sqldb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Server is one database server of a run (a postgres or a mariadbd): a
// lockservice.Member whose Dir (zlcpg-sN or zlcmariadb-sN in the run directory) holds
// its data directory (Data), the configuration the tool wrote (Conf: MariaDB's my.cnf,
// PostgreSQL's postgresql.conf in Data) and its log.
type Server struct {
	lockservice.Member
	Data string

	ns   string // the namespace it runs in
	host dbHost
}

// dbLayout is what differs between PostgreSQL's servers and MariaDB's in how the tool
// lays them out and stops them.
type dbLayout struct {
	kind   kind.Name
	prefix string      // of a server's directory: prefix + its id
	conf   string      // the configuration the tool writes, relative to that directory
	port   int         // the client port
	perm   os.FileMode // of the server's directory (PostgreSQL's account owns its own)
	// stop is the signal that shuts a server down at Close.
	stop syscall.Signal
	// comms are its processes' command names.
	comms []string
	// keep are the files copied back from a server's node directory on an SSH node
	// (dbServers.closeRemote).
	keep []string
	// keepAlive names the server's settings for KeepAlive's Idle, Interval and
	// Probes, and, when there is a fourth, its bound on unacknowledged data
	// (UserTimeout, in milliseconds).
	keepAlive []string
}

// dbServers is what a run's PostgreSQL and its MariaDB share: the run network
// (Managed, Dial), the servers and how they are laid out, the keepalive they were
// given, and how long each step of their start took. Postgres and MariaDB embed it.
type dbServers struct {
	lockservice.InNamespaces
	layout    dbLayout
	keepAlive time.Duration
	// Servers are the servers by number, from 1.
	Servers []*Server
	// remote holds the servers on SSH nodes (dialRemote), nil in namespaces.
	remote *lockservice.Remote

	phases []startPhase // how long each step of the start took
}

// newDBServers is a kind's servers on net, laid out as layout, none made yet.
func newDBServers(net *netns.Network, layout dbLayout, keepAlive time.Duration) dbServers {
	return dbServers{InNamespaces: lockservice.InNamespaces{Net: net}, layout: layout, keepAlive: keepAlive}
}

// addServer makes server id's namespace, its directory in dir, its record (writeDBRecord)
// and the keepalive's retransmissions in its namespace, and its host, which runs argv
// (given the server). The server is in d.Servers (for Close) as soon as its namespace
// exists.
func (d *dbServers) addServer(ctx context.Context, dir string, id int, argv func(*Server) []string) (*Server, error) {
	ns, err := d.Net.AddHost(ctx, fmt.Sprintf("s%d", id), lockservice.ServerAddr(id))
	if err != nil {
		return nil, err
	}
	s := d.layout.server(dir, id, ns.Netns)
	s.host = dbHost{lockservice.NewNSHost(id, ns, argv(s), s.Log)}
	s.Host = s.host
	d.Servers = append(d.Servers, s)
	if err := writeDBRecord(ns.Netns, s.Dir); err != nil {
		return s, err
	}
	if err := DBKeepAlive(d.keepAlive).applyRetries(ctx, ns.Netns); err != nil {
		return s, err
	}
	if err := os.Mkdir(s.Dir, d.layout.perm); err != nil {
		return s, d.errorf(s, err)
	}
	return s, nil
}

// server is server id in namespace ns, its directory in dir, as yet without a host.
func (l dbLayout) server(dir string, id int, ns string) *Server {
	dir = filepath.Join(dir, l.prefix+strconv.Itoa(id))
	return &Server{Member: lockservice.Member{ID: id, Port: l.port, Dir: dir, Conf: filepath.Join(dir, l.conf),
		Log: filepath.Join(dir, "server.log")}, Data: filepath.Join(dir, "data"), ns: ns}
}

// errorf is err as one of s's: "postgres server 2: ...".
func (d *dbServers) errorf(s *Server, err error) error {
	return fmt.Errorf("%s server %d: %w", d.layout.kind, s.ID, err)
}

// Nodes are the servers as the nemesis addresses them.
func (d *dbServers) Nodes() []nemesis.Server { return lockservice.Nodes(d.Servers) }

// server is server id, or an error naming the valid ids.
func (d *dbServers) server(id int) (*Server, error) {
	if id < 1 || id > len(d.Servers) {
		return nil, fmt.Errorf("%s: no server %d (1..%d)", d.layout.kind, id, len(d.Servers))
	}
	return d.Servers[id-1], nil
}

// Close stops every server (on SSH nodes: closeRemote; in namespaces: the layout's signal, then SIGKILL of whatever is left in
// its namespace after 3 s) and removes its directory, after the shared memory segment
// a killed postmaster leaves (removeLeftSegment finds none of MariaDB's).
func (d *dbServers) Close() error {
	if d.remote != nil {
		return d.closeRemote()
	}
	var errs []error
	for _, s := range d.Servers {
		errs = append(errs, s.host.stop(d.layout.stop, 3*time.Second))
		errs = append(errs, removeLeftSegment(s.Data), removeDBDir(s.ns, s.Dir))
	}
	return errors.Join(errs...)
}

// waitServers waits until serving says each of servers serves. A server that exited,
// or the timeout, is an error naming each server that does not serve, why, and the
// tail of its log.
func (d *dbServers) waitServers(ctx context.Context, timeout time.Duration, serving func(context.Context, *Server) error, servers ...*Server) error {
	checks := make([]lockservice.ServerCheck, len(servers))
	for i, s := range servers {
		checks[i] = s.Check("server", func(ctx context.Context) error { return serving(ctx, s) })
	}
	return lockservice.WaitServing(ctx, timeout, 50*time.Millisecond, fmt.Sprintf("%s not serving", d.layout.kind), "not every server serves", func() lockservice.ServingPoll {
		return lockservice.Poll(ctx, checks)
	})
}

// VanishedClientKept says what bounds how long a server keeps the session of a
// client that vanished, and its locks (nemesis.SessionKeeper).
func (d *dbServers) VanishedClientKept() string {
	kept := keepAliveSetting(d.layout, DBKeepAlive(d.keepAlive))
	if d.remote != nil {
		kept += "; on SSH nodes the nodes' own net.ipv4.tcp_retries2 stays as it is"
	}
	return kept
}

// eachServer runs fn on every server at once and returns what each gave, in order.
func eachServer[T any](servers []*Server, fn func(*Server) T) []T {
	out := make([]T, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = fn(s)
		}()
	}
	wg.Wait()
	return out
}
