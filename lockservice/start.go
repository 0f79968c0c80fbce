package lockservice

import (
	"context"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Config says which servers a run uses: ZooKeeper servers started in the run's
// namespaces (the default), on SSH nodes (SSH), or an existing ensemble (Connect).
type Config struct {
	// Ensemble says how to run servers the tool starts (its Dir receives their files).
	Ensemble EnsembleConfig
	// SSH, when set, starts the servers on these nodes instead (remote.go).
	SSH *SSHConfig
	// Connect, when set, is an existing ensemble's connect string (existing.go);
	// ConnectTimeout bounds the wait until it serves.
	Connect        string
	ConnectTimeout time.Duration
}

// Start starts (or reaches) the servers cfg asks for on network; runID names what
// it makes (namespaces, node directories). On error the Service returned, if not
// nil, holds what was started so far: Close it.
func Start(ctx context.Context, network *netns.Network, cfg Config, runID string) (Service, error) {
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
