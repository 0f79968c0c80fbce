package redis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// An existing Redis (run --service redis --connect) is one the tool does not manage:
// the instances at the connect addresses, in the topology the settings name (single:
// one; replicas: a primary first, then its replicas; redlock: independent
// primaries), reached through the run network's uplink. A run writes only keys that
// hold its root (the harness's chroot, /zlockcheck/<run> by default: the lock's path
// is under it, and a library's own keys hold the path), which must not exist before
// the run and are deleted at its end, on every instance. A password comes from
// redisopt.PasswordVar (REDISCLI_AUTH), never from a flag or a file.

// DefaultConnectPort is the port of a --connect address that names none.
const DefaultConnectPort = 6379

// ConnectRedis reaches the existing instances at connect, in the settings'
// topology, and waits until each one serves (a replica: linked to its primary).
func ConnectRedis(ctx context.Context, net *netns.Network, connect string, s RedisSettings, timeout time.Duration) (*Redis, error) {
	hostports, err := lockservice.ParseHostPorts(connect, DefaultConnectPort)
	if err != nil {
		return nil, err
	}
	r := &Redis{InNamespaces: lockservice.InNamespaces{Net: net}, cfg: RedisConfig{RedisSettings: s.WithDefaults(), Nodes: len(hostports)}, external: true}
	members, err := lockservice.ReachExisting(ctx, net, hostports)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		r.Instances = append(r.Instances, &m)
	}
	if err := r.WaitServing(ctx, timeout); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return r, nil
}

// Managed is false for an existing Redis: the tool starts, stops and signals none
// of its instances.
func (r *Redis) Managed() bool { return !r.external }

// rootKeys lists the keys on instance in that hold root, by SCAN (never KEYS, which
// blocks a production instance).
func (r *Redis) rootKeys(ctx context.Context, in *lockservice.Member, root string) ([]string, error) {
	pattern := "*" + globEscape(root) + "*"
	var keys []string
	cursor := "0"
	for {
		v, err := r.do(ctx, in, "SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
		if err != nil {
			return nil, fmt.Errorf("redis instance %d: SCAN: %w", in.ID, err)
		}
		page, ok := v.([]any)
		if !ok || len(page) != 2 {
			return nil, fmt.Errorf("redis instance %d: SCAN: unexpected reply %v", in.ID, v)
		}
		if cursor, err = replyString(page[0]); err != nil {
			return nil, err
		}
		batch, _ := page[1].([]any)
		for _, k := range batch {
			if s, err := replyString(k); err == nil {
				keys = append(keys, s)
			}
		}
		if cursor == "0" {
			return keys, nil
		}
	}
}

// globEscape quotes the characters SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

// PrepareRoot checks that no key on any instance holds root yet (the run must own
// every key it will delete), and returns how to delete every key that holds it at
// the run's end: retried within `within`, as a worker's last write may land late.
func (r *Redis) PrepareRoot(ctx context.Context, _ time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error) {
	for _, in := range r.Instances {
		keys, err := r.rootKeys(ctx, in, root)
		if err != nil {
			return nil, err
		}
		if len(keys) > 0 {
			return nil, fmt.Errorf("chroot %s: instance %d already has keys that hold it (%s): give a fresh one (--chroot), the run deletes them at its end", root, in.ID, keys[0])
		}
	}
	undo = func(ctx context.Context, within time.Duration) error {
		deadline := time.Now().Add(within)
		for {
			left, err := r.deleteRoot(ctx, root)
			if err == nil && left == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = fmt.Errorf("%d keys came back", left)
				}
				return fmt.Errorf("delete the keys of chroot %s: %w", root, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return undo, nil
}

// deleteRoot deletes every key that holds root on every instance (a replica gets
// its primary's DEL) and says how many were left afterwards.
func (r *Redis) deleteRoot(ctx context.Context, root string) (int, error) {
	for _, in := range r.writable(ctx) {
		keys, err := r.rootKeys(ctx, in, root)
		if err != nil {
			return 0, err
		}
		for _, k := range keys {
			if _, err := r.do(ctx, in, "DEL", k); err != nil {
				return 0, fmt.Errorf("redis instance %d: DEL %s: %w", in.ID, k, err)
			}
		}
	}
	left := 0
	for _, in := range r.writable(ctx) {
		keys, err := r.rootKeys(ctx, in, root)
		if err != nil {
			return 0, err
		}
		left += len(keys)
	}
	return left, nil
}

// writable are the instances a DEL goes to: every one but replicas.
func (r *Redis) writable(ctx context.Context) []*lockservice.Member {
	if !r.cfg.Topology.replicated() {
		return r.Instances
	}
	primary := 1
	if id, ok := r.Leader(ctx); ok {
		primary = id
	}
	return r.Instances[primary-1 : primary]
}
