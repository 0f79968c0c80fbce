package zookeeper

import (
	"context"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

func init() { lockservice.RegisterStart(kind.ZooKeeper, start) }

var _ lockservice.Service = (*Ensemble)(nil)

// start reaches an existing ensemble (Connect), or starts one on SSH nodes or in
// the run's namespaces; cfg.Settings, when set, is an EnsembleConfig.
func start(ctx context.Context, network *netns.Network, cfg lockservice.Config, runID string) (lockservice.Service, error) {
	ec, _ := cfg.Settings.(EnsembleConfig)
	if ec.Dir == "" {
		ec.Dir = cfg.Dir
	}
	if ec.Nodes == 0 {
		ec.Nodes = cfg.Nodes
	}
	var e *Ensemble
	var err error
	switch {
	case cfg.Connect != "":
		e, err = ConnectEnsemble(ctx, network, cfg.Connect, cfg.ConnectTimeout)
	case cfg.SSH != nil:
		e, err = StartRemoteEnsemble(ctx, network, ec, *cfg.SSH, runID)
	default:
		e, err = StartEnsemble(ctx, network, ec)
	}
	if e == nil { // a nil *Ensemble is no Service
		return nil, err
	}
	return e, err
}
