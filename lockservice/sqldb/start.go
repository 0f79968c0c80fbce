package sqldb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

func init() {
	lockservice.RegisterStart(kind.Postgres, startPostgres)
	lockservice.RegisterStart(kind.MariaDB, startMariaDB)
}

// serversDir is where a database's servers keep their files: an absolute path, for
// the servers run elsewhere than in the harness's directory.
func serversDir(cfg lockservice.Config, own string) (string, error) {
	dir := own
	if dir == "" {
		dir = cfg.Dir
	}
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("service %s: %w", cfg.Kind, err)
	}
	return abs, nil
}

// startPostgres starts the PostgreSQL servers cfg asks for in the run's namespaces or
// on SSH nodes (cfg.SSH), or reaches an existing PostgreSQL (cfg.Connect);
// cfg.Settings, when set, is a PostgresConfig.
func startPostgres(ctx context.Context, network *netns.Network, cfg lockservice.Config, runID string) (lockservice.Service, error) {
	if cfg.Connect != "" {
		p, err := ConnectPostgres(ctx, network, cfg.Connect, cfg.ConnectTimeout)
		if p == nil {
			return nil, err
		}
		return p, err
	}
	pc, _ := cfg.Settings.(PostgresConfig)
	dir, err := serversDir(cfg, pc.Dir)
	if err != nil {
		return nil, err
	}
	if cfg.SSH != nil {
		pc.Dir = dir
		p, err := StartRemotePostgres(ctx, network, pc, *cfg.SSH, runID)
		if p == nil {
			return nil, err
		}
		return p, err
	}
	pc.defaults()
	var made bool
	if pc.Dir, made, err = runDirFor(dir, pc.User); err != nil {
		return nil, err
	}
	p, err := StartPostgres(ctx, network, pc)
	if p == nil {
		if made {
			_ = os.Remove(pc.Dir)
		}
		return nil, err
	}
	return p, err
}

// startMariaDB starts the MariaDB servers cfg asks for in the run's namespaces or on
// SSH nodes (cfg.SSH), or reaches an existing MariaDB (cfg.Connect); cfg.Settings, when set, is a
// MariaDBConfig.
func startMariaDB(ctx context.Context, network *netns.Network, cfg lockservice.Config, runID string) (lockservice.Service, error) {
	if cfg.Connect != "" {
		m, err := ConnectMariaDB(ctx, network, cfg.Connect, cfg.ConnectTimeout)
		if m == nil {
			return nil, err
		}
		return m, err
	}
	mc, _ := cfg.Settings.(MariaDBConfig)
	var err error
	if mc.Dir, err = serversDir(cfg, mc.Dir); err != nil {
		return nil, err
	}
	if cfg.SSH != nil {
		m, err := StartRemoteMariaDB(ctx, network, mc, *cfg.SSH, runID)
		if m == nil {
			return nil, err
		}
		return m, err
	}
	if mc.Nodes == 0 {
		mc.Nodes = cfg.Nodes
	}
	m, err := StartMariaDB(ctx, network, mc)
	if m == nil {
		return nil, err
	}
	return m, err
}

// One sweep for both kinds: CleanupDatabases finds either's servers.
func init() { lockservice.RegisterSweep(kind.Postgres, sweep) }

// sweep removes the database servers, and their directories, whose run is gone
// (CleanupDatabases).
func sweep() ([]lockservice.Leftover, error) {
	left, err := CleanupDatabases()
	out := make([]lockservice.Leftover, len(left))
	for i, d := range left {
		short, killed := fmt.Sprintf("%s %s", d.Kind, d.Dir), ""
		if len(d.Pids) > 0 {
			short += fmt.Sprintf(" with pids %v", d.Pids)
			killed = fmt.Sprintf(", killed its processes %v", d.Pids)
		}
		out[i] = lockservice.Leftover{Kind: d.Kind, Short: short,
			Line: fmt.Sprintf("removed the %s server's directory %s%s: its run was gone", d.Kind, d.Dir, killed)}
	}
	return out, err
}

// The abilities the nemesis asks a run's service for, which the databases have.
var (
	_ nemesis.SessionKiller   = (*Postgres)(nil)
	_ nemesis.SessionKiller   = (*MariaDB)(nil)
	_ nemesis.SessionKeeper   = (*Postgres)(nil)
	_ nemesis.SessionKeeper   = (*MariaDB)(nil)
	_ nemesis.StandbyPromoter = (*Postgres)(nil)
)
