package sqldb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// Postgres is a running set of Postgres servers, a primary and optionally one
// streaming standby, each in its own namespace of the run's network (server N at
// ServerAddr(N), port 5432), made fresh for the run by initdb (the standby by
// pg_basebackup) and run as the postgres user. Failover swaps the two.
type Postgres struct {
	dbServers
	cfg  PostgresConfig
	user osUser
	// existing is set for an existing PostgreSQL (ConnectPostgres): its URL.
	existing *pgExisting

	mu       sync.Mutex
	promoted int    // the server last promoted (0: none)
	primary  int    // the server the standbys stream from: 1, then each Failover's target
	schema   string // an existing PostgreSQL's run's schema (PrepareRoot), "" for none

	failing      sync.Mutex   // one Failover at a time
	lastFailover []startPhase // how long each step of the last Failover took (mu)
}

var _ lockservice.Service = (*Postgres)(nil)

// StartPostgres makes and starts the primary, creates the lock's role and database
// (DatabaseUser, DatabaseName) on it, then, with cfg.Standby, clones it into a
// standby and starts that, and waits until every server serves (the standby
// streaming). On error the Postgres returned, if not nil, holds what was started so
// far: Close it.
func StartPostgres(ctx context.Context, net *netns.Network, cfg PostgresConfig) (*Postgres, error) {
	cfg.defaults()
	u, err := checkPostgres(cfg)
	if err != nil {
		return nil, err
	}
	p := &Postgres{dbServers: newDBServers(net, pgLayout, cfg.KeepAlive), cfg: cfg, user: u, primary: 1}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	primary, err := p.addServer(ctx, 1, p.initdb)
	if err != nil {
		return p, err
	}
	if err := timed(&p.phases, "primary serving", func() error {
		return p.waitServers(ctx, cfg.StartTimeout, primary)
	}); err != nil {
		return p, err
	}
	if err := timed(&p.phases, "role and database", func() error { return p.createLockDatabase(ctx, primary) }); err != nil {
		return p, err
	}
	if cfg.Standby {
		if _, err := p.addServer(ctx, 2, p.basebackup); err != nil {
			return p, err
		}
	}
	return p, timed(&p.phases, "all serving", func() error { return p.WaitServing(ctx, cfg.StartTimeout) })
}

// checkPostgres checks what StartPostgres needs before it makes anything: the
// binaries, setpriv, the account, and a Dir that account can enter.
func checkPostgres(cfg PostgresConfig) (osUser, error) {
	if cfg.Dir == "" {
		return osUser{}, errors.New("postgres: no directory for the servers' files")
	}
	for _, b := range []string{"initdb", "postgres", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return osUser{}, fmt.Errorf("postgres: %v: install Debian's postgresql (make setup)", err)
		}
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		return osUser{}, fmt.Errorf("postgres: setpriv (util-linux) not found: %v", err)
	}
	u, err := lookupOSUser(cfg.User)
	if err != nil {
		return osUser{}, fmt.Errorf("postgres: the account to run as: %w (Postgres refuses to run as root)", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return osUser{}, fmt.Errorf("postgres: make the servers' directory: %w", err)
	}
	if err := checkReachable(cfg.Dir, u); err != nil {
		return osUser{}, fmt.Errorf("postgres: %w", err)
	}
	return u, nil
}

// pgRunDirPrefix names a directory made for a run's PostgreSQL servers outside the
// run's own, when the servers' account cannot enter that one (runDirFor).
const pgRunDirPrefix = "zlcpg-run-"

// runDirFor is where a run's PostgreSQL servers keep their files: dir when the
// account they run as can enter it, else a fresh directory of the tool's
// (pgRunDirPrefix) under the system's temporary directory, which it can (made says
// so): the servers' files where their account reaches them, the run's history and
// reports where the user asked. removeDBDir removes it with the run's last server.
func runDirFor(dir, account string) (string, bool, error) {
	u, err := lookupOSUser(account)
	if err != nil || os.MkdirAll(dir, 0o755) != nil || checkReachable(dir, u) == nil {
		return dir, false, nil // StartPostgres says what is wrong, if anything is
	}
	own, err := os.MkdirTemp("", pgRunDirPrefix)
	if err == nil {
		err = os.Chmod(own, 0o755)
	}
	if err != nil {
		return "", false, fmt.Errorf("postgres: %s cannot enter %s, and a directory it can: %w", account, dir, err)
	}
	return own, true, nil
}

// addServer makes server id (dbServers.addServer), owned by the postgres user, fills
// its data directory with makeData, writes its configuration and starts it.
func (p *Postgres) addServer(ctx context.Context, id int, makeData func(context.Context, *Server) error) (*Server, error) {
	s, err := p.dbServers.addServer(ctx, p.cfg.Dir, id, func(s *Server) []string {
		return asUser(p.user, s.Dir, filepath.Join(p.cfg.BinDir, "postgres"), "-D", s.Data)
	})
	if err != nil {
		return s, err
	}
	if err := os.Lchown(s.Dir, p.user.UID, p.user.GID); err != nil {
		return s, err
	}
	if err := timed(&p.phases, fmt.Sprintf("server %d's data", id), func() error { return makeData(ctx, s) }); err != nil {
		return s, p.errorf(s, err)
	}
	if err := p.writeConf(s); err != nil {
		return s, p.errorf(s, err)
	}
	if err := s.host.Start(ctx); err != nil {
		return s, p.errorf(s, err)
	}
	return s, nil
}

// initdb makes a fresh cluster in s.Data as the postgres user. --no-sync (a fast
// start): initdb does not fsync the files it wrote; the cluster lives as long as
// the run, and the server fsyncs as usual from then on.
func (p *Postgres) initdb(ctx context.Context, s *Server) error {
	argv := asUser(p.user, s.Dir, filepath.Join(p.cfg.BinDir, "initdb"), "-D", s.Data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	return p.runAsUser(ctx, s, "initdb", argv)
}

// basebackup clones the primary (primaryID) into s.Data from the standby's
// namespace. --checkpoint=fast (a fast start): the primary checkpoints at once
// instead of spreading it over checkpoint_timeout; --no-sync as for initdb.
func (p *Postgres) basebackup(ctx context.Context, s *Server) error {
	argv := asUser(p.user, s.Dir, filepath.Join(p.cfg.BinDir, "pg_basebackup"), "-h", lockservice.ServerAddr(p.primaryID()).String(),
		"-p", strconv.Itoa(postgresPort), "-U", "postgres", "-w", "-D", s.Data,
		"--checkpoint=fast", "--no-sync", "-X", "stream")
	if _, err := netns.Exec(ctx, s.ns, nil, argv...); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Data, "standby.signal"), nil, 0o600)
}

// runAsUser runs argv (asUser's) on the host and returns an error naming it, with
// its output.
func (p *Postgres) runAsUser(ctx context.Context, s *Server, name string, argv []string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+s.Dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// writeConf writes s's postgresql.conf and pg_hba.conf, owned by the postgres user;
// a server other than the primary (primaryID) is its standby.
func (p *Postgres) writeConf(s *Server) error {
	var primary netip.Addr
	if id := p.primaryID(); s.ID != id {
		primary = lockservice.ServerAddr(id)
	}
	files := map[string][]byte{
		"postgresql.conf": postgresConf(s.ID, lockservice.ServerAddr(s.ID), primary, p.cfg.KeepAlive),
		"pg_hba.conf":     pgHBA(p.Net.CIDR(), p.Net.HubAddr()),
	}
	for name, data := range files {
		path := filepath.Join(s.Data, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		if err := os.Lchown(path, p.user.UID, p.user.GID); err != nil {
			return err
		}
	}
	return nil
}

// createLockDatabase makes the lock's role and database on the primary.
func (p *Postgres) createLockDatabase(ctx context.Context, s *Server) error {
	return p.query(ctx, s, 10*time.Second, func(ctx context.Context, c *pgx.Conn) error {
		for _, q := range []string{
			"CREATE ROLE " + DatabaseUser + " LOGIN",
			"CREATE DATABASE " + DatabaseName + " OWNER " + DatabaseUser,
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				return fmt.Errorf("postgres: %s: %w", q, err)
			}
		}
		return nil
	})
}

// Connect is the workers' connection string: a libpq URL (pgx, psql and psycopg read
// it) naming every server by number (server 1, the first primary, first), as user
// DatabaseUser on database DatabaseName without TLS:
// postgres://zlc@10.77.1.1:5432,10.77.1.2:5432/zlc?sslmode=disable. It stays the
// same after a Failover: the workers ask for a read-write server. On an existing
// PostgreSQL it is the --connect URL naming the servers by address, with the run's
// schema first in the search path (options=-c search_path=...).
func (p *Postgres) Connect() string {
	if p.existing != nil {
		u := p.existing.withHosts(lockservice.ClientAddrs(p.Servers), p.runSchema())
		return u.String()
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", DatabaseUser, strings.Join(lockservice.ClientAddrs(p.Servers), ","), DatabaseName)
}
