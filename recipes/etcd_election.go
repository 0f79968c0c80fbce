package recipes

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// NewEtcdElection builds the etcd-election recipe: go.etcd.io/etcd/client/v3/concurrency's
// Election, as its package documentation shows it, used as a leader workload whose
// leadership term is a lock hold.
//
// It shares etcd-mutex's client, sessions (a lease per session, reported as the
// session event), lost watch (the session's Done() closing while leading is lost),
// fenced counter and clean-up of an unknown release. Acquire makes an Election on the
// session at Config.Path and calls Campaign(ctx, value) under the acquire's deadline,
// the value naming the worker. Campaign returning nil is not yet a grant: it does not
// look again at its own key after its wait, so a key the members deleted meanwhile
// (the lease ended) would be a leader that is not; the recipe reads the election's
// leader back (Leader) and grants only when it is its key with Campaign's revision.
// Campaign leaves its key behind when its first transaction fails (the put may have
// been applied), when its wait fails while its context lives (a compacted watch, a
// lost watcher), and when its clean-up Resign fails; so after any failure the recipe
// reads its key back and deletes it, as etcd-mutex does after Lock. The fencing token
// is the leader key's create revision (Election.Rev()). Release is Resign under a few
// seconds' deadline: an error is info, and the next acquire first deletes the key if
// it still has that create revision (else Campaign would find the session's key and
// lead again with the old revision: the token would repeat). So the mutual exclusion
// checker proves that leading terms never overlap.
func NewEtcdElection(ctx context.Context, cfg Config) (Recipe, error) {
	r, err := newEtcdMutex(ctx, cfg, etcdCampaign)
	if err != nil {
		return nil, err
	}
	return &etcdElection{etcdMutex: r.(*etcdMutex), value: fmt.Sprintf("zlc-worker-%d", cfg.Worker)}, nil
}

// etcdElection is the etcd-election recipe: an etcdMutex's client, sessions, lost
// watch and counter, with Campaign and Resign in place of Lock and Unlock.
type etcdElection struct {
	*etcdMutex
	value    string                // what it campaigns with
	election *concurrency.Election // the term's, while granted
}

var (
	_ Recipe  = (*etcdElection)(nil)
	_ Counter = (*etcdElection)(nil)
)

// errNotLeader is the cause of an acquire whose Campaign returned but whose key is
// not the election's leader.
var errNotLeader = errors.New("campaign returned, but its key is not the leader (its lease ended while it waited)")

// Acquire implements Recipe: Campaign, then the leader read back.
func (r *etcdElection) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	s, err := r.beginAcquire(ctx, req)
	if err != nil {
		return Grant{}, err
	}
	e := concurrency.NewElection(s, r.cfg.Path)
	cctx, cancel := acquireContext(ctx, req)
	err = e.Campaign(cctx, r.value)
	cancel()
	if err == nil {
		err = r.leading(ctx, e)
	}
	if err != nil {
		return Grant{}, r.lockFailed(ctx, s, r.sessionKey(s), err)
	}
	r.mu.Lock()
	r.election = e
	r.mu.Unlock()
	return r.granted(s, nil, e.Key(), e.Rev())
}

// leading reads the election's leader back: nil when it is e's key with the create
// revision Campaign took, errNotLeader when it is another or none.
func (r *etcdElection) leading(ctx context.Context, e *concurrency.Election) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := e.Leader(ctx)
	switch {
	case errors.Is(err, concurrency.ErrElectionNoLeader):
		return errNotLeader
	case err != nil:
		// %v: the read's own deadline is not the acquire's timeout.
		return fmt.Errorf("campaign returned, but reading the leader back failed: %v", err)
	case string(resp.Kvs[0].Key) != e.Key() || resp.Kvs[0].CreateRevision != e.Rev():
		return errNotLeader
	}
	return nil
}

// Release implements Recipe: Resign, bounded like etcd-mutex's Unlock.
func (r *etcdElection) Release(ctx context.Context) error {
	_, key, rev, err := r.takeHold()
	r.mu.Lock()
	e := r.election
	r.election = nil
	r.mu.Unlock()
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, r.unlockTimeout())
	err = e.Resign(uctx)
	cancel()
	if err == nil {
		return nil
	}
	r.setStale(key, rev)
	return Info(fmt.Errorf("resign: %w", err))
}
