package sqldb

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// An existing PostgreSQL (run --service postgres --connect URL) is one the tool does
// not manage: the servers the URL names (postgres://ROLE@HOST:PORT[,HOST:PORT]/DB,
// libpq's form), reached through the run network's uplink. The harness and the
// workers log in as the URL's role on its database; the password comes from the
// environment (PGPASSWORD, or the ~/.pgpass libpq and pgx read), never from the
// URL, which is handed to every worker and recorded with the run. A run writes only
// in a schema of its own (runSchema, made from its chroot), which must not exist
// before the run, is first in the workers' search_path (the URL's options), and is
// dropped with everything in it at the run's end; its advisory locks are keyed by
// lock paths under its chroot. The role needs CREATE on the database (for the
// schema) and nothing more: it reads pg_locks and its own backends in
// pg_stat_activity, and terminates them (connection-kill).

// DefaultPostgresPort is the port of a --connect host that names none.
const DefaultPostgresPort = 5432

// PasswordVar is the environment variable a PostgreSQL password is taken from, as
// libpq, psycopg, node-postgres and pgx take it.
const PasswordVar = "PGPASSWORD"

// pgExisting is an existing PostgreSQL's --connect URL taken apart: how the harness
// and the workers reach its servers.
type pgExisting struct {
	url   url.URL  // as the user gave it; it has no password
	hosts []string // each server's host:port, as written
}

// parsePostgresURL reads a --connect URL. Its errors never repeat the URL, which may
// hold a password.
func parsePostgresURL(s string) (*pgExisting, error) {
	const want = "want postgres://ROLE@HOST:PORT[,HOST:PORT]/DATABASE[?sslmode=...]"
	// Go's URL parser reads one host: the list of hosts is taken out first.
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, fmt.Errorf("connect: not a URL: %s", want)
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostList := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostList = authority[:i+1], authority[i+1:]
	}
	u, err := url.Parse(scheme + "://" + userinfo + "hosts" + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("connect: not a URL (%v): %s", err, want)
	}
	u.Host = ""
	switch {
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		return nil, fmt.Errorf("connect: scheme %q: %s", u.Scheme, want)
	case u.User == nil || u.User.Username() == "":
		return nil, fmt.Errorf("connect: the URL names no role: %s", want)
	case strings.Trim(u.Path, "/") == "" || strings.Contains(strings.Trim(u.Path, "/"), "/"):
		return nil, fmt.Errorf("connect: the URL names no database: %s", want)
	}
	if _, has := u.User.Password(); has {
		return nil, fmt.Errorf("connect: the URL holds a password: give it in %s (or ~/.pgpass) instead; the URL goes to every worker and into the run's records", PasswordVar)
	}
	hosts, err := lockservice.ParseHostPorts(hostList, DefaultPostgresPort)
	if err != nil {
		return nil, err
	}
	for k := range u.Query() {
		if k == "password" || k == "passfile" {
			return nil, fmt.Errorf("connect: the URL's %s parameter: give the password in %s (or ~/.pgpass) instead", k, PasswordVar)
		}
	}
	return &pgExisting{url: *u, hosts: hosts}, nil
}

// withHosts is the URL naming hosts, with schema (when set) first in the search path
// (the options parameter, after the user's own options).
func (e *pgExisting) withHosts(hosts []string, schema string) url.URL {
	u := e.url
	u.Host = strings.Join(hosts, ",")
	if schema != "" {
		q := u.Query()
		q.Set("options", strings.TrimSpace(q.Get("options")+" -c search_path="+schema))
		u.RawQuery = encodeQuery(q)
	}
	return u
}

// encodeQuery is q as a URL's query with a space as %20: libpq reads a '+' as
// itself, not as a space.
func encodeQuery(q url.Values) string {
	return strings.ReplaceAll(q.Encode(), "+", "%20") // Encode writes a '+' of a value as %2B
}

// config is how the harness connects to server i (from 0) alone, in schema when set.
// target_session_attrs goes: the harness reads standbys too.
func (e *pgExisting) config(i int, inSchema bool, schema string) (*pgx.ConnConfig, error) {
	if !inSchema {
		schema = ""
	}
	u := e.withHosts(e.hosts[i:i+1], schema)
	q := u.Query()
	q.Del("target_session_attrs")
	q.Del("load_balance_hosts")
	u.RawQuery = encodeQuery(q)
	return pgx.ParseConfig(u.String())
}

// ConnectPostgres reaches the existing PostgreSQL servers the URL connect names and
// waits until each answers and one of them is a primary.
func ConnectPostgres(ctx context.Context, net *netns.Network, connect string, timeout time.Duration) (*Postgres, error) {
	e, err := parsePostgresURL(connect)
	if err != nil {
		return nil, err
	}
	members, err := lockservice.ReachExisting(ctx, net, e.hosts)
	if err != nil {
		return nil, err
	}
	p := &Postgres{dbServers: newDBServers(net, pgLayout, 0), existing: e, primary: 1}
	for _, m := range members {
		p.Servers = append(p.Servers, &Server{Member: m})
	}
	if err := p.WaitServing(ctx, timeout); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, ok := p.Leader(ctx); !ok {
		return nil, fmt.Errorf("connect: none of the %d servers is a primary (all are in recovery)", len(p.Servers))
	}
	return p, nil
}

// Managed is false for an existing PostgreSQL: the tool starts, stops and signals
// none of its servers.
func (p *Postgres) Managed() bool { return p.existing == nil }

// Close stops the tool's servers and removes their directories; an existing
// PostgreSQL's are not the tool's.
func (p *Postgres) Close() error {
	if p.existing != nil {
		return nil
	}
	return p.dbServers.Close()
}

// VanishedClientKept says what bounds how long a server keeps the session of a
// client that vanished, and its locks (nemesis.SessionKeeper).
func (p *Postgres) VanishedClientKept() string {
	if p.existing != nil {
		return "the existing PostgreSQL's own tcp_keepalives_idle, tcp_keepalives_interval, tcp_keepalives_count and tcp_user_timeout, and its hosts' net.ipv4.tcp_retries2 (not zlockcheck's to set)"
	}
	return p.dbServers.VanishedClientKept()
}

// runSchema is the schema of the run in progress on an existing PostgreSQL ("":
// none, or the tool's own servers).
func (p *Postgres) runSchema() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.schema
}

// schemaFor is the schema of a run whose chroot is root: "zlc_" and root's letters
// and digits, lower case, the rest runs of '_' (/zlockcheck/20261128-2218-ab12:
// zlc_zlockcheck_20261128_2218_ab12); one too long for PostgreSQL's 63 bytes keeps
// its end and the root's FNV-1a hash.
func schemaFor(root string) string {
	var b strings.Builder
	b.WriteString("zlc")
	under := false
	for _, r := range strings.ToLower(root) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			if under {
				b.WriteByte('_')
			}
			b.WriteRune(r)
			under = false
		default:
			under = true
		}
	}
	s := b.String()
	if s == "zlc" {
		s += "_root"
	}
	if len(s) > 63 {
		h := fnv.New32a()
		h.Write([]byte(root))
		s = fmt.Sprintf("zlc_%08x_%s", h.Sum32(), s[len(s)-(63-13):])
	}
	return s
}

// PrepareRoot makes the run's schema (schemaFor(root)) on the primary, refusing one
// that exists (the run must own everything it will drop), and returns how to drop
// it, with everything in it, at the run's end: retried within `within`, as a
// worker's last statement may hold a table's lock a moment longer.
func (p *Postgres) PrepareRoot(ctx context.Context, _ time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error) {
	schema := schemaFor(root)
	ident := pgx.Identifier{schema}.Sanitize()
	err = p.onPrimaryAs(ctx, pgAdmin, func(ctx context.Context, c *pgx.Conn) error {
		var exists bool
		if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return fmt.Errorf("chroot %s: schema %s already exists: give a fresh chroot (--chroot); the run drops its schema at its end", root, schema)
		}
		if _, err := c.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
			return fmt.Errorf("CREATE SCHEMA %s (the role needs CREATE on the database): %w", schema, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	p.mu.Lock()
	p.schema = schema
	p.mu.Unlock()
	undo = func(ctx context.Context, within time.Duration) error {
		deadline := time.Now().Add(within)
		for {
			err := p.onPrimaryAs(ctx, pgAdmin, func(ctx context.Context, c *pgx.Conn) error {
				_, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE")
				return err
			})
			if err == nil {
				p.mu.Lock()
				p.schema = ""
				p.mu.Unlock()
				return nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("postgres: drop the run's schema %s: %w", schema, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return undo, nil
}
