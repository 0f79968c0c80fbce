package etcd

import (
	"context"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

func init() {
	lockservice.RegisterStart(kind.Etcd, start)
	lockservice.RegisterSweep(kind.Etcd, sweep)
	lockservice.RegisterFetcher(lockservice.Fetcher{Kind: kind.Etcd, What: "etcd releases built from the Go module proxy",
		Fetch: BuildReleases, Sweep: SweepReleases})
}

// start starts the members cfg asks for in the run's namespaces; cfg.Settings, when
// set, is a Config.
func start(ctx context.Context, network *netns.Network, cfg lockservice.Config, runID string) (lockservice.Service, error) {
	if cfg.Connect != "" {
		e, err := ConnectExisting(ctx, network, cfg.Connect, cfg.ConnectTimeout)
		if e == nil {
			return nil, err
		}
		return e, err
	}
	ec, _ := cfg.Settings.(Config)
	if ec.Dir == "" {
		ec.Dir = cfg.Dir
	}
	if ec.Nodes == 0 {
		ec.Nodes = cfg.Nodes
	}
	start := Start
	if cfg.SSH != nil {
		ssh := *cfg.SSH
		start = func(ctx context.Context, network *netns.Network, ec Config, runID string) (*Etcd, error) {
			return StartRemote(ctx, network, ec, ssh, runID)
		}
	}
	e, err := start(ctx, network, ec, runID)
	if e == nil {
		return nil, err
	}
	return e, err
}

// sweep kills the members whose run's namespace is gone (Cleanup).
func sweep() ([]lockservice.Leftover, error) {
	left, err := Cleanup()
	return lockservice.LeftServers(kind.Etcd, "etcd", left), err
}
