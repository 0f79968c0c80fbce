package sqldb

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// PostgresConfig says how to run a run's Postgres servers: a primary (server 1) and,
// with Standby, one streaming standby (server 2, hot_standby) replicating it.
type PostgresConfig struct {
	// Standby adds a streaming standby of the primary.
	Standby bool
	// Dir is where each server's directory goes (Dir/zlcpg-s1, Dir/zlcpg-s2). The
	// postgres user must be able to enter it.
	Dir string
	// BinDir holds initdb, postgres and pg_basebackup ("": Debian's
	// /usr/lib/postgresql/15/bin).
	BinDir string
	// User is the account the servers run as ("": postgres; Postgres refuses root).
	User string
	// StartTimeout bounds the wait until every server serves (the standby streaming).
	StartTimeout time.Duration
	// KeepAlive bounds how long a server keeps the session of a client that vanished
	// without closing its connection, and the session's locks (see DBKeepAlive); 0
	// leaves it to the kernel's defaults.
	KeepAlive time.Duration
}

// The lock's database and role on Postgres and MariaDB: the workers connect as
// user zlc (no password; trusted from the run's network only) to database zlc.
const (
	DatabaseName = "zlc"
	DatabaseUser = "zlc"
)

// postgresPort is every Postgres server's port (each has its own address).
const postgresPort = 5432

// pgLayout is how the tool lays out a Postgres server: zlcpg-sN, its postgresql.conf
// in its data directory, owned by the postgres user. Close shuts it down with SIGQUIT,
// an immediate shutdown (a smart one, SIGTERM, would wait for the clients).
var pgLayout = dbLayout{kind: kind.Postgres, prefix: pgDirPrefix, conf: "data/postgresql.conf", port: postgresPort,
	perm: 0o700, stop: syscall.SIGQUIT, comms: []string{"postgres"},
	keep:      []string{"data/postgresql.conf", "data/pg_hba.conf", "server.log"},
	keepAlive: []string{"tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout"}}

// dbMarker opens every configuration file the tool writes for a database server:
// cleanup kills only a server whose configuration starts with it.
const dbMarker = "# written by zlockcheck"

func (c *PostgresConfig) defaults() {
	if c.BinDir == "" {
		c.BinDir = "/usr/lib/postgresql/15/bin"
	}
	if c.User == "" {
		c.User = "postgres"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
}

// Nodes is the number of servers: 1, or 2 with a standby.
func (c PostgresConfig) Nodes() int {
	if c.Standby {
		return 2
	}
	return 1
}

// postgresConf is the postgresql.conf of server id listening on addr; primary is the
// address of the server it streams from (invalid: it is the primary). The one place
// a server's configuration is written. Everything not named here keeps Postgres's
// default: fsync, synchronous_commit and full_page_writes stay on; wal_level replica,
// max_wal_senders and hot_standby are already what a standby needs.
func postgresConf(id int, addr netip.Addr, primary netip.Addr, keepAlive time.Duration) []byte {
	role := "primary"
	if primary.IsValid() {
		role = "standby of " + primary.String()
	}
	lines := []string{
		fmt.Sprintf("%s: Postgres server %d, %s", dbMarker, id, role),
		"listen_addresses = '" + addr.String() + "'",
		fmt.Sprintf("port = %d", postgresPort),
		// No Unix socket: the run directory's path may be longer than a socket's
		// 107 bytes, and every client (the harness too) comes over TCP.
		"unix_socket_directories = ''",
		// The process titles name the server (cleanup and ps show whose it is).
		fmt.Sprintf("cluster_name = 'zlc-s%d'", id),
		// Dynamic shared memory in files under the data directory, not in
		// /dev/shm: a killed server leaves nothing outside its directory.
		"dynamic_shared_memory_type = mmap",
		// The log goes to stderr, which the tool appends to server.log.
		"logging_collector = off",
		"log_destination = 'stderr'",
		"log_line_prefix = '%m [%p] %q%u@%d %r '",
		// Sessions and terminations show in the log (the session-kill fault).
		"log_connections = on",
		"log_disconnections = on",
		// Workers each hold a dedicated connection, polls open more.
		"max_connections = 200",
		// What initdb would have written (this file replaces its postgresql.conf).
		"shared_buffers = 128MB",
		"datestyle = 'iso, mdy'",
		"timezone = 'UTC'",
	}
	// How soon the server gives up on a client that vanished (client-vanish).
	lines = append(lines, DBKeepAlive(keepAlive).confLines(pgLayout.keepAlive)...)
	if primary.IsValid() {
		lines = append(lines,
			fmt.Sprintf("primary_conninfo = 'host=%s port=%d user=postgres application_name=s%d'", primary, postgresPort, id),
			"hot_standby = on",
			// Report to the primary at once, so pg_stat_replication is current.
			"wal_receiver_status_interval = 1s")
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// pgHBA is the servers' pg_hba.conf for a run network cidr whose harness (hub)
// address is hub: trust, but only from the run's network; the superuser only from
// the harness (and the standby's replication connection from the network).
func pgHBA(cidr netip.Prefix, hub netip.Addr) []byte {
	lines := []string{
		dbMarker + ": trust only from the run's network " + cidr.String(),
		"# TYPE  DATABASE     USER      ADDRESS  METHOD",
		fmt.Sprintf("host    all          postgres  %s  trust", netip.PrefixFrom(hub, hub.BitLen())),
		fmt.Sprintf("host    replication  postgres  %s  trust", cidr),
		fmt.Sprintf("host    %s          %s       %s  trust", DatabaseName, DatabaseUser, cidr),
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}
