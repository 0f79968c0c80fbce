package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// An existing ensemble (run --connect) is one the tool does not manage: it starts,
// stops, signals and reconfigures none of its servers. The workers and the harness
// reach them through the run network's uplink (netns.AddUplink); a run writes only
// under its chroot (PrepareRoot), which must not exist before the run and is deleted
// at its end (by the undo PrepareRoot returns).

// DefaultConnectPort is the port of a --connect address that names none.
const DefaultConnectPort = 2181

// ParseConnect splits a connect string (host:port,host:port; a missing port is
// 2181) into host and port pairs, without resolving names.
func ParseConnect(s string) ([]string, error) {
	return lockservice.ParseHostPorts(s, DefaultConnectPort)
}

// ConnectEnsemble reaches an existing ensemble: the connect
// addresses resolved once, reached through an uplink added to net, each a Server
// whose host the tool does not manage. It waits until every server listed serves.
func ConnectEnsemble(ctx context.Context, net *netns.Network, connect string, timeout time.Duration) (*Ensemble, error) {
	hostports, err := ParseConnect(connect)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{net: net, external: true}
	members, err := lockservice.ReachExisting(ctx, net, hostports)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		e.Servers = append(e.Servers, &Server{Member: m})
	}
	if err := e.WaitServing(ctx, timeout); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return e, nil
}

// makeChroot creates the run's chroot (and the parents missing), refusing one that
// exists: the run must own every znode it will delete. It returns the znodes it
// created, outermost first.
func makeChroot(conn *zk.Conn, chroot string) ([]string, error) {
	if ok, _, err := conn.Exists(chroot); err != nil {
		return nil, fmt.Errorf("chroot %s: %w", chroot, err)
	} else if ok {
		return nil, fmt.Errorf("chroot %s already exists on the ensemble: give a fresh one (--chroot), the run deletes it at its end", chroot)
	}
	var made []string
	parts := strings.Split(strings.TrimPrefix(chroot, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		_, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
		switch {
		case err == nil:
			made = append(made, p)
		case errors.Is(err, zk.ErrNodeExists) && p != chroot:
		default:
			return made, fmt.Errorf("chroot: create %s: %w", p, err)
		}
	}
	return made, nil
}

// removeChroot deletes the chroot's subtree, then each parent the run created if it
// is empty (another run may share /zlockcheck). Ephemeral nodes of sessions not yet
// expired may reappear in the count: it retries for a while.
func removeChroot(conn *zk.Conn, chroot string, made []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := deleteTree(conn, chroot)
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("delete chroot %s: %w", chroot, err)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range slices.Backward(made) {
		if p == chroot {
			continue
		}
		if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return nil
}

// deleteTree deletes p and everything under it; a node already gone is fine.
func deleteTree(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := deleteTree(conn, path.Join(p, c)); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// PrepareRoot creates root, the znode a --connect run writes under (and its missing
// parents), refusing one that exists: the run must own every znode it will delete.
// undo deletes root's subtree, then each parent it created if empty (another run may
// share them), retrying for up to within while the workers' ephemeral nodes go;
// ctx bounds reaching the ensemble.
func (e *Ensemble) PrepareRoot(ctx context.Context, sessionTimeout time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error) {
	conn, err := e.Client(ctx, sessionTimeout)
	if err != nil {
		return nil, err
	}
	made, err := makeChroot(conn, root)
	conn.Close()
	undo = func(ctx context.Context, within time.Duration) error {
		if len(made) == 0 {
			return nil
		}
		conn, err := e.Client(ctx, sessionTimeout)
		if err != nil {
			return fmt.Errorf("delete chroot %s: %w", root, err)
		}
		defer conn.Close()
		if err := removeChroot(conn, root, made, within); err != nil {
			return err
		}
		made = nil
		return nil
	}
	return undo, err
}
