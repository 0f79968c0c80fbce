package lockservice

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// Config says which servers a run uses: ZooKeeper servers started in the run's
// namespaces (the default), on SSH nodes (SSH), or an existing ensemble (Connect); or,
// for Kind redis, Redis instances started in the run's namespaces (Redis); for Kind
// postgres or mariadb, database servers started there (Postgres, MariaDB).
type Config struct {
	// Kind is the kind of service ("": kind.Default).
	Kind kind.Name
	// Dir receives the servers' files, whatever their kind; Nodes is how many
	// servers the run asked for (0: the kind's own default). A kind's section may
	// say otherwise for itself (Ensemble.Dir, Redis.Nodes, ...).
	Dir   string
	Nodes int
	// Redis says how to run the Redis instances of Kind redis (its Dir and Nodes,
	// when unset, are Config's).
	Redis RedisConfig
	// Postgres and MariaDB say how to run the servers of Kind postgres and mariadb
	// (their Dir, when unset, is Config's; MariaDB's Nodes too).
	Postgres PostgresConfig
	MariaDB  MariaDBConfig
	// Ensemble says how to run servers the tool starts (its Dir receives their files).
	Ensemble EnsembleConfig
	// SSH, when set, starts the servers on these nodes instead (remote.go).
	SSH *SSHConfig
	// Connect, when set, is an existing ensemble's connect string (existing.go);
	// ConnectTimeout bounds the wait until it serves.
	Connect        string
	ConnectTimeout time.Duration
}

// StartFunc starts (or reaches) the servers of one kind that cfg asks for on network;
// runID names what it makes (namespaces, node directories). On error the Service
// returned, if not nil, holds what was started so far.
type StartFunc func(ctx context.Context, network *netns.Network, cfg Config, runID string) (Service, error)

// starters holds how each kind's servers start: written at start (init), read after.
var starters = map[kind.Name]StartFunc{}

// Register adds a new kind of lock service: its description to the catalogue
// (kind.Register) and how its servers start. Call it once, from the kind's package's
// init.
func Register(k kind.Kind, start StartFunc) {
	kind.Register(k)
	registerStart(k.Name, start)
}

// registerStart records how the servers of a kind already in the catalogue (the
// built-in ones) start.
func registerStart(n kind.Name, start StartFunc) {
	if _, taken := starters[n]; taken || start == nil {
		panic(fmt.Sprintf("lockservice: a second or nil start for %q", n))
	}
	starters[n] = start
}

func init() {
	registerStart(kind.ZooKeeper, startZooKeeper)
	registerStart(kind.Redis, startRedis)
	registerStart(kind.Postgres, startDatabase)
	registerStart(kind.MariaDB, startDatabase)
}

// Start starts (or reaches) the servers cfg asks for on network; runID names what
// it makes (namespaces, node directories). On error the Service returned, if not
// nil, holds what was started so far: Close it.
func Start(ctx context.Context, network *netns.Network, cfg Config, runID string) (Service, error) {
	start, ok := starters[kind.Of(cfg.Kind).Name]
	if !ok {
		return nil, fmt.Errorf("service: want %s, got %q", kind.Names(), cfg.Kind)
	}
	return start(ctx, network, cfg, runID)
}

// startZooKeeper reaches an existing ensemble (Connect), or starts one on SSH nodes
// or in the run's namespaces.
func startZooKeeper(ctx context.Context, network *netns.Network, cfg Config, runID string) (Service, error) {
	if cfg.Ensemble.Dir == "" {
		cfg.Ensemble.Dir = cfg.Dir
	}
	if cfg.Ensemble.Nodes == 0 {
		cfg.Ensemble.Nodes = cfg.Nodes
	}
	switch {
	case cfg.Connect != "":
		e, err := ConnectEnsemble(ctx, network, cfg.Connect, cfg.ConnectTimeout)
		return orNil(e), err
	case cfg.SSH != nil:
		e, err := startSSHEnsemble(ctx, network, cfg.Ensemble, *cfg.SSH, runID)
		return orNil(e), err
	default:
		e, err := StartEnsemble(ctx, network, cfg.Ensemble)
		return orNil(e), err
	}
}

// orNil keeps a nil *Ensemble from becoming a non-nil Service.
func orNil(e *Ensemble) Service {
	if e == nil {
		return nil
	}
	return e
}

// startRedis starts the Redis instances cfg asks for: only in the run's namespaces
// (an existing Redis, or Redis on SSH nodes, is not built).
func startRedis(ctx context.Context, network *netns.Network, cfg Config, _ string) (Service, error) {
	switch {
	case cfg.Connect != "":
		return nil, errors.New("service redis: testing an existing Redis (--connect) is not built yet")
	case cfg.SSH != nil:
		return nil, errors.New("service redis: Redis on SSH nodes (--ssh-nodes) is not built yet")
	}
	rc := cfg.Redis
	if rc.Dir == "" {
		rc.Dir = cfg.Dir
	}
	if rc.Nodes == 0 {
		rc.Nodes = cfg.Nodes
	}
	r, err := StartRedis(ctx, network, rc)
	if r == nil {
		return nil, err
	}
	return r, err
}

// startDatabase starts the Postgres or MariaDB servers cfg asks for, only in the
// run's namespaces.
func startDatabase(ctx context.Context, network *netns.Network, cfg Config, _ string) (Service, error) {
	switch {
	case cfg.Connect != "":
		return nil, fmt.Errorf("service %s: testing an existing server (--connect) is not built yet", cfg.Kind)
	case cfg.SSH != nil:
		return nil, fmt.Errorf("service %s: servers on SSH nodes (--ssh-nodes) are not built yet", cfg.Kind)
	}
	dir := cfg.Dir
	if dir != "" {
		abs, err := filepath.Abs(dir) // the servers run elsewhere than in the harness's directory
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", cfg.Kind, err)
		}
		dir = abs
	}
	if cfg.Kind == kind.Postgres {
		pc := cfg.Postgres
		if pc.Dir == "" {
			pc.Dir = dir
		}
		p, err := StartPostgres(ctx, network, pc)
		if p == nil {
			return nil, err
		}
		return p, err
	}
	mc := cfg.MariaDB
	if mc.Dir == "" {
		mc.Dir = dir
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
