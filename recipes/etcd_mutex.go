package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// etcdVariant is one of the etcd recipes on the client's concurrency package: Mutex
// as its docs show it, a use of it (or a change to it) of a family etcd's issues
// show, or Election as a leader workload (etcdCampaign).
type etcdVariant int

const (
	// etcdCorrect is concurrency.Mutex as its docs show it.
	etcdCorrect etcdVariant = iota
	// etcdValidity reports lost from its own clock: at the send time of the last
	// keep-alive the servers answered, plus the TTL.
	etcdValidity
	// etcdUnlockRetried retries an Unlock whose outcome was unknown in the
	// background, by key, while the worker goes on locking with the same session
	// (etcd-io/etcd#22082).
	etcdUnlockRetried
	// etcdCampaign is concurrency.Election as a leader workload (NewEtcdElection):
	// etcdCorrect's sessions, lost watch and counter, Campaign and Resign for Lock
	// and Unlock.
	etcdCampaign
	// etcdTryLock polls TryLock until the acquire's deadline instead of queueing in
	// Lock.
	etcdTryLock
	// etcdIgnoreDone never watches the session's Done(): a holder whose lease ended
	// is never told.
	etcdIgnoreDone
	// etcdNoWait takes the lock once its key is put, without waiting for the keys
	// created before it.
	etcdNoWait
	// etcdRevisionBefore takes its revision from a read before its put, and waits
	// only for the keys created before that read.
	etcdRevisionBefore
	// etcdValidityUnlockRetried is etcdValidity with etcdUnlockRetried's application:
	// the delete-by-key family alone (its own lease account hides the late Done()).
	etcdValidityUnlockRetried
)

// ownValidity reports whether the variant keeps its own account of the lease
// (etcdValidity's renewals, validity and gRPC keep-alives).
func (v etcdVariant) ownValidity() bool { return v == etcdValidity || v == etcdValidityUnlockRetried }

// retriesUnlock reports whether the variant's application retries an Unlock of
// unknown outcome in the background and takes Lock's nil as the grant (#22082).
func (v etcdVariant) retriesUnlock() bool {
	return v == etcdUnlockRetried || v == etcdValidityUnlockRetried
}

// etcdVariants are the etcd recipes of the catalogue, by name.
var etcdVariants = []struct {
	v    etcdVariant
	name string
	doc  string
}{
	{etcdCorrect, "etcd-mutex", "etcd's concurrency.Mutex (client v3.6, or the one of the members' release: --etcd-client) as its docs show: a session (lease) per worker, Lock under the acquire's deadline, Unlock; lost when the session's Done() closes; the key's create revision as the fencing token"},
	{etcdValidity, "etcd-mutex-validity", "etcd-mutex that also keeps its own account of the lease: it renews it itself every third of the TTL and reports lost once the TTL has passed since the send of the last renewal the servers answered, before the session's Done() (which counts from the answer, checked once a second); revokes a lease it gave up on; gRPC keep-alives on its connections"},
	{etcdUnlockRetried, "etcd-mutex-unlock-retried", "etcd-mutex whose application retries an Unlock that failed (outcome unknown) in the background until it answers, as a retry helper would, while it locks again on the same session, and takes Lock's nil as the grant (no read back): etcd-io/etcd#22082"},
	{etcdCampaign, "etcd-election", "etcd's concurrency.Election (client v3.6, or the one of the members' release: --etcd-client) as its docs show, a leadership term as a hold: Campaign under the acquire's deadline, granted once the leader read back is its key; Resign as the release; lost when the session's Done() closes while leading; the leader key's create revision (Election.Rev()) as the fencing token"},
	{etcdTryLock, "etcd-mutex-trylock", "etcd-mutex whose acquire does not queue: it calls TryLock (client v3.5 and later) every 100 ms until the acquire's deadline, as an application that must not wait in line does; TryLock puts its key and, finding an older one, deletes it again (ErrLocked)"},
	{etcdIgnoreDone, "mutant-etcd-ignore-done", "etcd-mutex that never watches the session's Done(): a holder whose lease expired or was revoked is never told"},
	{etcdNoWait, "mutant-etcd-no-wait", "etcd-mutex that counts itself the holder once its key is put, without waiting for the keys created before it"},
	{etcdRevisionBefore, "mutant-etcd-revision-before-put", "etcd-mutex that takes its revision from a read before its put: it does not wait for keys another session put in between"},
	{etcdValidityUnlockRetried, "mutant-etcd-unlock-retried", "etcd-mutex-validity whose application retries an Unlock that failed (outcome unknown) in the background until it answers, while it locks again on the same session, and takes Lock's nil as the grant: the delete by key after a lost reply of etcd-io/etcd#22082, alone (its own lease account hides the session's late Done())"},
}

// etcdVariantOf builds the recipe of variant v.
func etcdVariantOf(v etcdVariant) Constructor {
	if v == etcdCampaign {
		return NewEtcdElection
	}
	return func(ctx context.Context, cfg Config) (Recipe, error) { return newEtcdMutex(ctx, cfg, v) }
}

// NewEtcdMutex builds the etcd-mutex recipe: go.etcd.io/etcd/client/v3/concurrency's
// Mutex, as its package documentation shows it.
//
// The worker has one client (every address of Config.Servers as an endpoint) and one
// session at a time (concurrency.NewSession, whose lease's TTL is the session
// timeout in whole seconds, at least one), reported as the session event with the
// lease's id. Acquire makes a Mutex on the session at Config.Path and calls Lock
// under the acquire's deadline. Lock cleans up its key when its wait fails, but not
// when its first transaction fails; so after an error the recipe reads its key back:
// gone, the acquire failed (a timeout when the deadline passed); still there, it
// deletes it, and only an unknown answer to that is info. A granted lock's fencing
// token is its key's create revision. While held, the session's Done() closing (the
// client stopped keeping the lease alive: it expired, was revoked, or the client
// could not renew it for a TTL) is reported as lost, and the next acquire makes a
// new session. Release is Unlock under a few seconds' deadline: an error is info
// (the delete may have been applied), and the next acquire first deletes that key if
// it still has its create revision (else Lock would take the session's key back with
// its old revision, and the grant would repeat the last token).
func NewEtcdMutex(ctx context.Context, cfg Config) (Recipe, error) {
	return newEtcdMutex(ctx, cfg, etcdCorrect)
}

// etcdMutex is the etcd-mutex recipe and its variants.
type etcdMutex struct {
	cfg     Config
	v       etcdVariant
	log     *log.Logger
	client  *clientv3.Client
	ttl     int
	timeout time.Duration // one request's bound

	mu      sync.Mutex
	session *concurrency.Session
	mutex   *concurrency.Mutex // the held lock (nil when none, or a variant's own key)
	key     string             // the held lock's key; "" when none
	rev     int64              // its create revision
	// stale is the key of a release whose outcome is unknown, with its create
	// revision: the next acquire deletes it first (dropStale).
	stale    string
	staleRev int64
	// valid is when the session's lease may have expired (etcdValidity): the send
	// of the last renewal the members answered, plus the TTL.
	valid time.Time
	held  uint64 // the hold's generation while held, 0 when not
	gen   uint64
}

var (
	_ Recipe  = (*etcdMutex)(nil)
	_ Counter = (*etcdMutex)(nil)
)

func newEtcdMutex(ctx context.Context, cfg Config, v etcdVariant) (Recipe, error) {
	name := etcdVariants[v].name
	if len(cfg.Servers) == 0 {
		return nil, Fail(fmt.Errorf("recipe %s: no etcd endpoint in connect", name))
	}
	if cfg.Kind != workloads.Mutex && cfg.Kind != workloads.Counter {
		return nil, Fail(fmt.Errorf("recipe %s speaks mutex and counter, not %s", name, cfg.Kind))
	}
	logger := redisLogger(name, &cfg)
	ttl := int((cfg.SessionTimeout + time.Second - 1) / time.Second)
	r := &etcdMutex{cfg: cfg, v: v, log: logger, ttl: max(ttl, 1), timeout: max(cfg.SessionTimeout/2, time.Second)}
	ccfg := clientv3.Config{Endpoints: cfg.Servers, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if v.ownValidity() {
		// gRPC keep-alives, as etcd's client documentation suggests for a client that
		// must notice a dead or stalled connection: a watch (Lock's wait for its
		// predecessor) on a connection that lost packets is moved to another member
		// within a third of the TTL, not left to TCP's retransmission backoff.
		ccfg.DialKeepAliveTime, ccfg.DialKeepAliveTimeout = max(time.Duration(r.ttl)*time.Second/3, time.Second), time.Second
	}
	c, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	r.client = c
	if _, err := r.currentSession(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

// currentSession is the worker's session, a new one when there is none or the last
// one's Done() has closed.
func (r *etcdMutex) currentSession(ctx context.Context) (*concurrency.Session, error) {
	r.mu.Lock()
	s := r.session
	r.mu.Unlock()
	if s != nil {
		select {
		case <-s.Done():
		default:
			return s, nil
		}
	}
	sent := time.Now()
	// The lease is granted here, under a deadline (NewSession's own grant would
	// wait for a server as long as its context lives, which is the session's).
	gctx, cancel := context.WithTimeout(ctx, 2*r.timeout)
	lease, err := r.client.Grant(gctx, int64(r.ttl))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("grant the session's lease: %w", err)
	}
	s, err = concurrency.NewSession(r.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(r.ttl))
	if err != nil {
		return nil, fmt.Errorf("new session: %w", err)
	}
	r.mu.Lock()
	r.session = s
	r.mu.Unlock()
	r.cfg.Events.Session(int64(s.Lease()), nil)
	if r.v != etcdIgnoreDone {
		go r.watch(s)
	}
	if r.v.ownValidity() {
		go r.renew(s, sent.Add(time.Duration(lease.TTL)*time.Second))
	}
	return s, nil
}

// renew keeps session s's lease alive itself (etcdValidity), a third of the TTL
// apart, until the session ends, and reports lost once valid (the send time of the
// last renewal the servers answered, plus the TTL they answered) passes while held:
// the servers may have expired the lease by then, whatever the client has heard.
func (r *etcdMutex) renew(s *concurrency.Session, valid time.Time) {
	every := time.Duration(r.ttl) * time.Second / 3
	r.setValid(s, valid)
	for {
		wait := min(every, time.Until(valid))
		select {
		case <-s.Done():
			return
		case <-time.After(max(wait, 0)):
		}
		if !time.Now().Before(valid) {
			r.lose(s, "its lease's validity ran out: no renewal answered within a TTL of its send")
			return
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), valid)
		resp, err := r.client.KeepAliveOnce(ctx, s.Lease())
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			r.lose(s, "its lease is gone (a renewal found it expired or revoked)")
			return
		case err == nil && resp.TTL > 0:
			valid = sent.Add(time.Duration(resp.TTL) * time.Second)
			r.setValid(s, valid)
		}
	}
}

// setValid records session s's validity, while it is the recipe's session.
func (r *etcdMutex) setValid(s *concurrency.Session, valid time.Time) {
	r.mu.Lock()
	if r.session == s {
		r.valid = valid
	}
	r.mu.Unlock()
}

// expired reports whether the session's validity has run out (etcdValidity: a
// holder paused past it learns at its next call, before its timer fires).
func (r *etcdMutex) expired() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.v.ownValidity() && !r.valid.IsZero() && !time.Now().Before(r.valid)
}

// lose reports lost if a lock of session s is held, and drops s: the next acquire
// makes a new session (s's keep-alive stops; its keys go with its lease).
func (r *etcdMutex) lose(s *concurrency.Session, why string) {
	r.mu.Lock()
	mine := r.session == s
	lost := mine && r.held != 0
	if lost {
		r.held = 0
	}
	if mine {
		r.session = nil
	}
	r.mu.Unlock()
	s.Orphan()
	if lost {
		r.cfg.Events.Lost(why)
	}
	go r.revoke(s.Lease())
}

// revoke ends a lease the recipe gave up on (its keys would otherwise stand in the
// queue until the members expire it, later still if a new leader extends it), trying
// until the members answer, for a few TTLs at most.
func (r *etcdMutex) revoke(id clientv3.LeaseID) {
	deadline := time.Now().Add(3 * time.Duration(r.ttl) * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		_, err := r.client.Revoke(ctx, id)
		cancel()
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watch reports lost when session s's Done() closes while a lock of it is held.
func (r *etcdMutex) watch(s *concurrency.Session) {
	<-s.Done()
	r.mu.Lock()
	lost := r.session == s && r.held != 0
	if lost {
		r.held = 0
	}
	r.mu.Unlock()
	if lost {
		r.cfg.Events.Lost("the session's lease ended (Done() closed: expired, revoked, or not renewed for a TTL)")
	}
}

// Acquire implements Recipe.
func (r *etcdMutex) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	s, err := r.beginAcquire(ctx, req)
	if err != nil {
		return Grant{}, err
	}
	m := concurrency.NewMutex(s, r.cfg.Path)
	lctx, cancel := acquireContext(ctx, req)
	key, err := r.lock(lctx, s, m)
	cancel()
	if err != nil {
		return Grant{}, r.lockFailed(ctx, s, key, err)
	}
	var rev int64
	if r.v.retriesUnlock() {
		// As an application has it: no read back; the grant's revision is the
		// response header's (the create revision when Lock did not wait).
		rev = m.Header().Revision
		r.log.Printf("granted %s at revision %d", key, rev)
	} else if rev, err = r.createRevision(ctx, key); err != nil {
		return Grant{}, Info(fmt.Errorf("locked, but reading its key back failed: %w", err))
	}
	if r.v == etcdNoWait || r.v == etcdRevisionBefore {
		m = nil // its own key, not the Mutex's
	}
	return r.granted(s, m, key, rev)
}

// beginAcquire is what every acquire does before it waits: it refuses a mode or a
// second hold, deletes the key of a release whose outcome was unknown (dropStale),
// and returns the worker's session.
func (r *etcdMutex) beginAcquire(ctx context.Context, req AcquireRequest) (*concurrency.Session, error) {
	if req.Mode != "" {
		return nil, Fail(fmt.Errorf("kind mutex has no modes, got mode %q", req.Mode))
	}
	r.mu.Lock()
	already := r.held != 0
	r.mu.Unlock()
	if already {
		return nil, Fail(errors.New("already held"))
	}
	if err := r.dropStale(ctx); err != nil {
		return nil, Info(fmt.Errorf("the key of the last release, whose outcome is unknown, could not be deleted: %w", err))
	}
	s, err := r.currentSession(ctx)
	if err != nil {
		return nil, Info(err) // a lease may have been granted
	}
	return s, nil
}

// acquireContext is ctx bounded by the acquire's timeout, if it has one.
func acquireContext(ctx context.Context, req AcquireRequest) (context.Context, context.CancelFunc) {
	if req.Timeout > 0 {
		return context.WithTimeout(ctx, req.Timeout)
	}
	return ctx, func() {}
}

// granted records the hold of key (create revision rev, Mutex m when the recipe
// unlocks through it) on session s, and returns the grant: its token is rev, its
// place the session and key. A session that ended meanwhile is info, not a grant.
func (r *etcdMutex) granted(s *concurrency.Session, m *concurrency.Mutex, key string, rev int64) (Grant, error) {
	r.mu.Lock()
	r.gen++
	r.mutex, r.key, r.rev, r.held = m, key, rev, r.gen
	r.mu.Unlock()
	select {
	case <-s.Done():
		if r.v != etcdIgnoreDone {
			r.mu.Lock()
			r.held = 0
			r.mu.Unlock()
			return Grant{}, Info(errors.New("locked, but the session ended meanwhile"))
		}
	default:
	}
	token, _ := json.Marshal(rev)
	return Grant{Token: token, Lock: &workloads.LockPlace{Session: fmt.Sprintf("0x%x", int64(s.Lease())), Keys: []string{key}}}, nil
}

// sessionKey is the key of session s under the lock's prefix, as NewMutex and
// NewElection name it: PATH/<lease in hex>.
func (r *etcdMutex) sessionKey(s *concurrency.Session) string {
	return r.cfg.Path + "/" + strconv.FormatInt(int64(s.Lease()), 16)
}

// lock is Mutex.Lock, or the variant's change to it; it returns the lock's key (set
// on an error too, when the key may have been put).
func (r *etcdMutex) lock(ctx context.Context, s *concurrency.Session, m *concurrency.Mutex) (string, error) {
	key := r.sessionKey(s)
	switch r.v {
	case etcdNoWait:
		_, err := r.client.Put(ctx, key, "", clientv3.WithLease(s.Lease()))
		return key, err
	case etcdRevisionBefore:
		return key, r.lockRevisionBefore(ctx, s, key)
	case etcdTryLock:
		return key, tryLockUntil(ctx, m)
	}
	return key, m.Lock(ctx)
}

// tryLockPoll is how long etcd-mutex-trylock waits between two TryLocks.
const tryLockPoll = 100 * time.Millisecond

// tryLockUntil calls m.TryLock until it takes the lock, fails otherwise than by
// ErrLocked (its key may then be left: the caller reads it back), or ctx ends.
func tryLockUntil(ctx context.Context, m *concurrency.Mutex) error {
	for {
		err := m.TryLock(ctx)
		if !errors.Is(err, concurrency.ErrLocked) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(tryLockPoll):
		}
	}
}

// lockRevisionBefore is Lock with the revision read before the put: it waits only for
// the keys created before that read.
func (r *etcdMutex) lockRevisionBefore(ctx context.Context, s *concurrency.Session, key string) error {
	pfx := r.cfg.Path + "/"
	before, err := r.client.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if _, err := r.client.Put(ctx, key, "", clientv3.WithLease(s.Lease())); err != nil {
		return err
	}
	for {
		resp, err := r.client.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(before.Header.Revision),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := waitFor(ctx, r.client, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitFor waits until key is deleted after revision rev.
func waitFor(ctx context.Context, c *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range c.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut()) {
		if err := w.Err(); err != nil {
			return err
		}
		if len(w.Events) > 0 {
			return nil
		}
	}
	return ctx.Err()
}

// lockFailed is what an acquire whose Lock returned err reports: its key is read back
// (Lock leaves it when its first transaction failed) and deleted when still there.
func (r *etcdMutex) lockFailed(ctx context.Context, s *concurrency.Session, key string, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The servers ended the lease before the client's keep-alive noticed: the
		// next acquire makes a new session at once.
		r.mu.Lock()
		if r.session == s {
			r.session = nil
		}
		r.mu.Unlock()
		s.Orphan()
		return Fail(fmt.Errorf("the session's lease is gone: %w", err))
	}
	if errors.Is(err, concurrency.ErrSessionExpired) {
		return Fail(err) // its key is gone with its lease
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, gerr := r.client.Get(cctx, key)
	switch {
	case gerr != nil:
		return Info(fmt.Errorf("%v; and reading its key back failed: %w", err, gerr))
	case len(resp.Kvs) > 0 && resp.Kvs[0].Lease == int64(s.Lease()):
		if _, derr := r.client.Delete(cctx, key); derr != nil {
			return Info(fmt.Errorf("%v; its key was left, and deleting it failed: %w", err, derr))
		}
		r.log.Printf("lock failed (%v) and left its key: deleted", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Fail(fmt.Errorf("%w: %v", ErrTimeout, err))
	}
	return Fail(err)
}

// createRevision is key's create revision (its fencing token); an error when the key
// is gone.
func (r *etcdMutex) createRevision(ctx context.Context, key string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, errors.New("its key is gone")
	}
	return resp.Kvs[0].CreateRevision, nil
}

// Release implements Recipe.
func (r *etcdMutex) Release(ctx context.Context) error {
	m, key, rev, err := r.takeHold()
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, r.unlockTimeout())
	if m != nil {
		err = m.Unlock(uctx)
	} else {
		_, err = r.client.Delete(uctx, key)
	}
	cancel()
	if err == nil {
		return nil
	}
	if r.v.retriesUnlock() && m != nil {
		go r.retryUnlock(m)
	} else {
		r.setStale(key, rev)
	}
	return Info(fmt.Errorf("unlock: %w", err))
}

// takeHold ends the hold a release gives up and returns its Mutex (nil when the
// recipe unlocks by key), key and create revision; Fail when nothing is held (none
// was granted, the session ended, or its validity ran out).
func (r *etcdMutex) takeHold() (*concurrency.Mutex, string, int64, error) {
	r.mu.Lock()
	m, key, held := r.mutex, r.key, r.held != 0
	rev := r.rev
	r.mutex, r.key, r.held = nil, "", 0
	r.mu.Unlock()
	if key == "" {
		return nil, "", 0, Fail(errors.New("not held"))
	}
	if !held {
		return nil, "", 0, Fail(errors.New("not held: the session's lease ended before the release"))
	}
	if r.expired() {
		r.mu.Lock()
		s := r.session
		r.mu.Unlock()
		if s != nil {
			r.lose(s, "its lease's validity ran out before the release")
		}
		return nil, "", 0, Fail(errors.New("not held: its lease's validity ran out before the release"))
	}
	return m, key, rev, nil
}

// setStale records key, with its create revision, as a release's whose outcome is
// unknown: the next acquire deletes it first (dropStale).
func (r *etcdMutex) setStale(key string, rev int64) {
	r.mu.Lock()
	r.stale, r.staleRev = key, rev
	r.mu.Unlock()
}

// dropStale deletes the key a release left with its outcome unknown, if it still has
// the create revision it was granted with (#22115's guard), before a new Lock: Lock
// would otherwise take the session's key back with its old revision, and the grant
// would repeat the last one's fencing token.
func (r *etcdMutex) dropStale(ctx context.Context) error {
	r.mu.Lock()
	key, rev := r.stale, r.staleRev
	r.mu.Unlock()
	if key == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if _, err := r.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return err
	}
	r.mu.Lock()
	r.stale = ""
	r.mu.Unlock()
	return nil
}

// unlockTimeout bounds an Unlock: a request's bound, or a second for the application
// that retries it (etcdUnlockRetried: the deadline such code gives a cleanup call).
func (r *etcdMutex) unlockTimeout() time.Duration {
	if r.v.retriesUnlock() {
		return time.Second
	}
	return r.timeout
}

// retryUnlock calls Unlock on m until it answers, as an application's retry helper
// would (etcdUnlockRetried).
func (r *etcdMutex) retryUnlock(m *concurrency.Mutex) {
	for i := 0; i < 100; i++ {
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), r.unlockTimeout())
		err := m.Unlock(ctx)
		cancel()
		// Answered: deleted now, or released already (3.6's ErrLockReleased; 3.5
		// deletes the released key's placeholder and says nil).
		if err == nil || m.Key() == "\x00" {
			r.log.Printf("unlock of %s retried: %v", m.Key(), err)
			return
		}
	}
}

// Read implements Counter: the counter's key, 0 when missing.
func (r *etcdMutex) Read(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.Get(ctx, r.cfg.CounterPath)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 || len(resp.Kvs[0].Value) == 0 {
		return 0, nil
	}
	v, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, Fail(fmt.Errorf("counter holds %q: %w", resp.Kvs[0].Value, err))
	}
	return v, nil
}

// Write implements Counter: a put, or with Config.Fenced a transaction that puts
// only while the lock's key has the create revision it was granted with
// (Mutex.IsOwner).
func (r *etcdMutex) Write(ctx context.Context, v int64) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	put := clientv3.OpPut(r.cfg.CounterPath, strconv.FormatInt(v, 10))
	if !r.cfg.Fenced {
		_, err := r.client.Do(ctx, put)
		return err
	}
	r.mu.Lock()
	key, rev := r.key, r.rev
	r.mu.Unlock()
	if key == "" {
		return Fail(errors.New("fenced write while not holding"))
	}
	// Mutex.IsOwner's comparison: the key still has the create revision it was granted with.
	resp, err := r.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(put).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return Fail(ErrFenced)
	}
	return nil
}

// Close implements Recipe: the session is closed (its lease revoked, its keys
// deleted), then the client.
func (r *etcdMutex) Close() error {
	r.mu.Lock()
	s := r.session
	r.mu.Unlock()
	if s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		_, _ = r.client.Revoke(ctx, s.Lease())
		cancel()
	}
	return r.client.Close()
}
