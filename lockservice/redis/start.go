package redis

import (
	"context"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

func init() { lockservice.RegisterStart(kind.Redis, start) }

// start starts the Redis instances cfg asks for in the run's namespaces or on SSH
// nodes (cfg.SSH), or reaches an existing Redis (cfg.Connect); cfg.Settings, when
// set, is a RedisConfig.
func start(ctx context.Context, network *netns.Network, cfg lockservice.Config, runID string) (lockservice.Service, error) {
	rc, _ := cfg.Settings.(RedisConfig)
	if cfg.Connect != "" {
		r, err := ConnectRedis(ctx, network, cfg.Connect, rc.RedisSettings, cfg.ConnectTimeout)
		if r == nil {
			return nil, err
		}
		return r, err
	}
	if rc.Dir == "" {
		rc.Dir = cfg.Dir
	}
	if cfg.SSH != nil {
		r, err := StartRemoteRedis(ctx, network, rc, *cfg.SSH, runID)
		if r == nil {
			return nil, err
		}
		return r, err
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

func init() { lockservice.RegisterSweep(kind.Redis, sweep) }

// sweep kills the redis-servers whose run's namespace is gone (CleanupRedis).
func sweep() ([]lockservice.Leftover, error) {
	left, err := CleanupRedis()
	return lockservice.LeftServers(kind.Redis, "redis-server", left), err
}
