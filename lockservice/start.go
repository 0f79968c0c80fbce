package lockservice

import (
	"context"
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// Config says which servers a run uses: a kind's servers started in the run's
// namespaces (the default), on SSH nodes (SSH), or an existing deployment (Connect),
// as far as the kind can; Settings are the kind's own.
type Config struct {
	// Kind is the kind of service ("": kind.Default).
	Kind kind.Name
	// Dir receives the servers' files, whatever their kind; Nodes is how many
	// servers the run asked for (0: the kind's own default).
	Dir   string
	Nodes int
	// SSH, when set, starts the servers on these nodes instead (nodes.go).
	SSH *SSHConfig
	// Connect, when set, is an existing deployment's connect string;
	// ConnectTimeout bounds the wait until it serves.
	Connect        string
	ConnectTimeout time.Duration
	// Settings is the kind's own section, of the type its package declares
	// (zookeeper.EnsembleConfig, redis.Config, sqldb.PostgresConfig,
	// sqldb.MariaDBConfig); nil takes the kind's defaults.
	Settings any
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
	RegisterStart(k.Name, start)
}

// RegisterStart records how the servers of a kind already in the catalogue (the
// built-in ones, whose packages call it from their init) start.
func RegisterStart(n kind.Name, start StartFunc) {
	if _, taken := starters[n]; taken || start == nil {
		panic(fmt.Sprintf("lockservice: a second or nil start for %q", n))
	}
	starters[n] = start
}

// Registered reports whether the servers of kind n can start: its package, which
// registers them, is linked into this program.
func Registered(n kind.Name) bool { return starters[kind.Of(n).Name] != nil }

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
