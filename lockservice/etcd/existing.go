package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// An existing etcd cluster (run --connect) is one the tool does not manage: the
// members at the connect addresses, reached through the run network's uplink. A run
// writes only keys under its root (the harness's chroot, /zlockcheck/<run> by
// default: the lock's path and the counter are under it), which must hold no key
// before the run and are deleted at its end. Its faults are the client faults; the
// leases the run's workers took are theirs, and session-expire revokes only those.

// DefaultConnectPort is the port of a --connect address that names none.
const DefaultConnectPort = ClientPort

// ConnectExisting reaches the existing members at connect and waits until each
// says it is healthy.
func ConnectExisting(ctx context.Context, net *netns.Network, connect string, timeout time.Duration) (*Etcd, error) {
	hostports, err := lockservice.ParseHostPorts(connect, DefaultConnectPort)
	if err != nil {
		return nil, err
	}
	members, err := lockservice.ReachExisting(ctx, net, hostports)
	if err != nil {
		return nil, err
	}
	e := &Etcd{InNamespaces: lockservice.InNamespaces{Net: net}, cfg: Config{Nodes: len(members)}, external: true}
	for _, m := range members {
		e.Members = append(e.Members, &m)
	}
	if err := e.WaitServing(ctx, timeout); err != nil {
		return e, fmt.Errorf("connect: %w", err)
	}
	return e, nil
}

// Managed is false for an existing cluster: the tool starts, stops and signals none
// of its members.
func (e *Etcd) Managed() bool { return !e.external }

// PrepareRoot refuses a root that already holds keys, and returns how to delete the
// keys under it at the run's end (harness.rootMaker).
func (e *Etcd) PrepareRoot(ctx context.Context, _ time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error) {
	c, err := e.admin()
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(root, "/") + "/"
	rctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	resp, err := c.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return nil, fmt.Errorf("chroot %s: %w", root, err)
	}
	if resp.Count > 0 {
		return nil, fmt.Errorf("chroot %s: the cluster already has %d keys under %s: give a fresh one (--chroot), the run deletes them at its end", root, resp.Count, prefix)
	}
	return func(ctx context.Context, within time.Duration) error {
		deadline := time.Now().Add(within)
		for {
			dctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
			_, err := c.Delete(dctx, prefix, clientv3.WithPrefix())
			cancel()
			if err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("delete the keys of chroot %s: %w", root, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}, nil
}
