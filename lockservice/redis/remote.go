package redis

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// Redis on SSH nodes (run --service redis --ssh-nodes): instance N runs on node N,
// Debian's redis-server from the node's PATH, listening on the node's address, port
// 6379, its files in its node directory (lockservice.Remote: redis.conf, data/,
// server.log), in the topology the settings name (a replica's primary is node 1). The
// harness reaches the instances from this machine's own namespace
// (lockservice.RootDial), the workers through the run network's uplink; the nemesis
// kills, pauses and partitions an instance through its SSH host, as a ZooKeeper's.

// StartRemoteRedis starts cfg's instances on the SSH nodes, one a node, and waits
// until every one serves. localDir receives each instance's files at Close
// (servers/sN). On error the Redis returned, if not nil, holds what was started so
// far: Close it.
func StartRemoteRedis(ctx context.Context, net *netns.Network, cfg RedisConfig, ssh lockservice.SSHConfig, runID string) (*Redis, error) {
	cfg.Nodes = len(ssh.Nodes)
	cfg.defaults()
	if err := cfg.validateNodes(cfg.Nodes); err != nil {
		return nil, err
	}
	remote, err := lockservice.DialRemote(ctx, ssh, runID, cfg.Dir, "redis.conf")
	if err != nil {
		return nil, err
	}
	r := &Redis{InNamespaces: lockservice.InNamespaces{Net: net}, cfg: cfg, remote: remote}
	addrs := remote.Addrs()
	for _, h := range remote.Hosts {
		local := remote.LocalDir(h.ID())
		r.Instances = append(r.Instances, &lockservice.Member{ID: h.ID(), Host: h, Port: redisPort, Dir: local,
			Conf: filepath.Join(local, "redis.conf"), Log: filepath.Join(local, "server.log")})
	}
	err = remote.Each(func(h *lockservice.SSHHost) error {
		f := redisFiles{Conf: h.File("redis.conf"), Log: h.File("server.log"), Pid: h.File("redis.pid"), Data: h.File("data")}
		var primary netip.Addr
		if cfg.Topology == RedisReplicas && h.ID() > 1 {
			primary = addrs[0]
		}
		conf := redisConf(cfg.RedisSettings, h.ID(), h.Addr(), f, primary)
		if err := remote.Prepare(ctx, h, []string{"data"}, map[string]string{"redis.conf": string(conf)}); err != nil {
			return err
		}
		h.SetArgv([]string{cfg.Binary, f.Conf})
		return nil
	})
	if err != nil {
		return r, err
	}
	return r, remote.StartAll(ctx, net, func() error { return r.WaitServing(ctx, cfg.StartTimeout) })
}

// Dial opens a TCP connection from the harness to addr: from this process's own
// namespace to an instance on an SSH node, else from the run network's hub.
func (r *Redis) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	if r.remote != nil {
		return lockservice.RootDial(ctx, addr, timeout)
	}
	return r.InNamespaces.Dial(ctx, addr, timeout)
}

// closeRemote kills the instances on the nodes, copies their files back and removes
// the node directories.
func (r *Redis) closeRemote() error {
	if err := r.remote.Close(nil, "redis.conf", "server.log"); err != nil {
		return fmt.Errorf("redis on SSH nodes: %w", err)
	}
	return nil
}
