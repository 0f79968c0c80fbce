package etcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// SessionName is how a lease is written as a session: 0x<hex>, as the recipes
// report it.
func SessionName(lease int64) string { return fmt.Sprintf("0x%x", lease) }

// prefix is where the entries of lock l live: its path and a slash, as
// concurrency.NewMutex makes it.
func prefix(l lockservice.Lock) string { return strings.TrimSuffix(l.Path, "/") + "/" }

// OpenLock is a reader of the lock's keys over the harness's client
// (harness.lockInspector).
func (e *Etcd) OpenLock(ctx context.Context, _ time.Duration) (lockservice.LockReader, error) {
	c, err := e.admin()
	if err != nil {
		return nil, err
	}
	return lockReader{c: c}, nil
}

// LiveSessions are the leases the cluster holds now (nil when it cannot say).
func (e *Etcd) LiveSessions(ctx context.Context) map[string]bool {
	c, err := e.admin()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	defer cancel()
	resp, err := c.Leases(ctx)
	if err != nil {
		return nil
	}
	live := map[string]bool{}
	for _, l := range resp.Leases {
		live[SessionName(int64(l.ID))] = true
	}
	return live
}

// lockReader reads a lock's keys: its entries are the keys under its prefix, and
// the keys the workers' places name outside it (a library that keeps its own prefix,
// as Python's etcd3 puts /locks/NAME: lockservice.Lock.Places), in create-revision
// order, named by what follows the prefix (an outside key by itself).
type lockReader struct{ c *clientv3.Client }

var _ lockservice.LockReader = lockReader{}

// Entries are the lock's keys, oldest first (linearizable reads: fresh or not).
func (r lockReader) Entries(l lockservice.Lock, _ bool) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*lockservice.OpTimeout)
	defer cancel()
	p := prefix(l)
	resp, err := r.c.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	kvs := resp.Kvs
	for _, key := range outsideKeys(l) {
		resp, err := r.c.Get(ctx, key, clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		kvs = append(kvs, resp.Kvs...)
	}
	slices.SortStableFunc(kvs, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = strings.TrimPrefix(string(kv.Key), p)
	}
	return out, nil
}

// outsideKeys are the keys the workers' places name that are not under the lock's
// prefix, once each.
func outsideKeys(l lockservice.Lock) []string {
	var out []string
	for _, pl := range l.Places {
		for _, k := range pl.Keys {
			if !strings.HasPrefix(k, prefix(l)) && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// key is the key of the lock's entry name: an outside key a place names is its own
// name, any other is under the prefix.
func key(l lockservice.Lock, name string) string {
	if slices.Contains(outsideKeys(l), name) {
		return name
	}
	return prefix(l) + name
}

// Owner is the lease the entry is attached to (PersistentOwner for a key with none).
func (r lockReader) Owner(l lockservice.Lock, name string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*lockservice.OpTimeout)
	defer cancel()
	resp, err := r.c.Get(ctx, key(l, name))
	if err != nil {
		return "", false, err
	}
	if len(resp.Kvs) == 0 {
		return "", false, nil
	}
	if resp.Kvs[0].Lease == 0 {
		return lockservice.PersistentOwner, true, nil
	}
	return SessionName(resp.Kvs[0].Lease), true, nil
}

// Close: the reader shares the harness's client, which Close closes.
func (lockReader) Close() {}

// ExpireSession revokes the lease a worker reported as its session, as a lease's
// expiry would end it: the servers delete every key attached to it at once
// (nemesis.SessionExpirer). It says which member answered (0: not known).
func (e *Etcd) ExpireSession(ctx context.Context, session string) (int, error) {
	id, ok := lockservice.ParseSession(session)
	if !ok {
		return 0, fmt.Errorf("etcd: session %q is not a lease id (0x<hex>)", session)
	}
	c, err := e.admin()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	defer cancel()
	if _, err := c.Revoke(ctx, clientv3.LeaseID(id)); err != nil {
		return 0, fmt.Errorf("etcd: revoke lease %s: %w", session, err)
	}
	return 0, nil
}

// MakeCounter puts the counter workload's key with 0 (harness.counterStore).
func (e *Etcd) MakeCounter(ctx context.Context, _ time.Duration, path string) error {
	c, err := e.admin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	defer cancel()
	_, err = c.Put(ctx, path, "0")
	return err
}

// ReadCounter reads the counter's key (0 when missing or empty).
func (e *Etcd) ReadCounter(ctx context.Context, _ time.Duration, path string) (int64, error) {
	c, err := e.admin()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	defer cancel()
	resp, err := c.Get(ctx, path)
	if err != nil || len(resp.Kvs) == 0 || len(resp.Kvs[0].Value) == 0 {
		return 0, err
	}
	var v int64
	if _, err := fmt.Sscan(string(resp.Kvs[0].Value), &v); err != nil {
		return 0, fmt.Errorf("etcd: counter %s holds %q: %w", path, resp.Kvs[0].Value, err)
	}
	return v, nil
}

var _ nemesis.Compactor = (*Etcd)(nil)

// Compact compacts the cluster's history up to its current revision, physically
// (the members discard it before answering), as the compaction fault asks.
func (e *Etcd) Compact(ctx context.Context) (int64, error) {
	c, err := e.admin()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	defer cancel()
	resp, err := c.Get(ctx, "zlc-compaction", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd: the current revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("etcd: compact at revision %d: %w", rev, err)
	}
	return rev, nil
}
