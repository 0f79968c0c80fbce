package sqldb

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// MariaDBConfig says how to run a run's MariaDB servers: one, or Nodes independent
// ones (no replication between them).
type MariaDBConfig struct {
	// Nodes is the number of independent servers (0: 1).
	Nodes int
	// Dir is where each server's directory goes (Dir/zlcmariadb-s1, ...).
	Dir string
	// Binary and InstallDB are the server and the program that makes its data
	// directory ("": mariadbd and mariadb-install-db on the PATH, Debian's
	// mariadb-server).
	Binary    string
	InstallDB string
	// StartTimeout bounds the wait until every server serves.
	StartTimeout time.Duration
	// KeepAlive bounds how long a server keeps the connection of a client that
	// vanished without closing it, and its GET_LOCK locks (see DBKeepAlive); 0 leaves
	// it to the kernel's defaults.
	KeepAlive time.Duration
}

// mariadbPort is every MariaDB server's port (each has its own address).
const mariadbPort = 3306

// mariadbLayout is how the tool lays out a MariaDB server: zlcmariadb-sN with its
// my.cnf. Close shuts it down with SIGTERM, a normal shutdown.
var mariadbLayout = dbLayout{kind: kind.MariaDB, prefix: mariadbDirPrefix, conf: "my.cnf", port: mariadbPort,
	perm: 0o755, stop: syscall.SIGTERM, comms: []string{"mariadbd", "mysqld"}, keep: []string{"my.cnf", "server.log"},
	keepAlive: []string{"tcp_keepalive_time", "tcp_keepalive_interval", "tcp_keepalive_probes"}}

func (c *MariaDBConfig) defaults() {
	if c.Nodes == 0 {
		c.Nodes = 1
	}
	if c.Binary == "" {
		c.Binary = "mariadbd"
	}
	if c.InstallDB == "" {
		c.InstallDB = "mariadb-install-db"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 20 * time.Second
	}
}

// mariadbFiles are where one server's files go.
type mariadbFiles struct {
	Conf, Init, Log, Pid, Data string
}

// mariadbConf is the my.cnf of server id of nodes listening on addr with its files
// at f. The one place a server's configuration is written; what it does not name
// keeps MariaDB's default (innodb_flush_log_at_trx_commit = 1: a commit is on disk
// when acknowledged).
//
// The server runs as root (user = root): its files stay root's in the run
// directory, which the mysql account may not be able to enter, and it reaches
// nothing but the run's private network. mariadbd refuses root unless told so.
func mariadbConf(id, nodes int, addr netip.Addr, f mariadbFiles, keepAlive time.Duration) []byte {
	lines := []string{
		fmt.Sprintf("%s: MariaDB server %d of %d independent", dbMarker, id, nodes),
		"[mariadbd]",
		"user = root",
		"datadir = " + f.Data,
		"bind-address = " + addr.String(),
		fmt.Sprintf("port = %d", mariadbPort),
		// Relative to the data directory: the run directory's path may be longer
		// than a socket's 107 bytes. Nobody uses it; every client comes over TCP.
		"socket = mariadb.sock",
		"pid-file = " + f.Pid,
		// Its own temporary directory: a starting server (and mariadb-install-db's
		// bootstrap) deletes every "#sql" file of its tmpdir, so servers sharing /tmp
		// delete each other's temporary tables: one install in six failed so when
		// explore's lanes made three at once (2026-11-30). The data directory is the
		// server's own and exists before the bootstrap.
		"tmpdir = " + f.Data,
		"log-error = " + f.Log,
		// The lock's database and users, made at every start (idempotent).
		"init-file = " + f.Init,
		// Clients by address, never by name: processlist's host is the address
		// ServerOf looks for, and no lookup stalls a connection.
		"skip-name-resolve",
		// No binary log: nothing replicates from this server.
		"skip-log-bin",
		// A fast start: an 8 MiB redo log instead of 96 MiB, written at install
		// and on every start (more frequent checkpoints; durability is the same).
		"innodb_log_file_size = 8M",
		// Workers each hold a dedicated connection, polls open more.
		"max_connections = 200",
	}
	// How soon the server gives up on a client that vanished (client-vanish).
	lines = append(lines, DBKeepAlive(keepAlive).confLines(mariadbLayout.keepAlive)...)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// mariadbInit is the init-file: the lock's database (DatabaseName) and user
// (DatabaseUser, no password, from the run's network cidr only), and an
// administrator (root, no password) for the harness's address hub alone. One
// statement a line, each ended by a semicolon, as init-file wants.
func mariadbInit(cidr netip.Prefix, hub netip.Addr) []byte {
	net := fmt.Sprintf("'%s'@'%s/%s'", DatabaseUser, cidr.Masked().Addr(), maskOf(cidr))
	admin := fmt.Sprintf("'root'@'%s'", hub)
	lines := []string{
		"CREATE DATABASE IF NOT EXISTS " + DatabaseName + ";",
		"CREATE USER IF NOT EXISTS " + net + ";",
		"GRANT ALL ON " + DatabaseName + ".* TO " + net + ";",
		"CREATE USER IF NOT EXISTS " + admin + ";",
		"GRANT ALL PRIVILEGES ON *.* TO " + admin + " WITH GRANT OPTION;",
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// maskOf is an IPv4 prefix's netmask, 255.255.0.0 for a /16 (MariaDB's host
// patterns take a mask, not a length).
func maskOf(p netip.Prefix) string {
	var m [4]byte
	for i := 0; i < p.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(m).String()
}
