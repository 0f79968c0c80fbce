package recipes

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// redLockMinServers is the fewest independent primaries a RedLock recipe accepts.
const redLockMinServers = 3

// NewRedsync builds the redsync recipe: RedLock with github.com/go-redsync/redsync/v4
// over the independent Redis primaries of Config.Servers (at least 3), one go-redis
// client each, configured as for redis-lock (redisOptions), through redsync's
// goredis/v9 pool. Only kind mutex; RedLock has no fencing token, so a fenced init
// fails.
//
// Acquire is Mutex.LockContext of a new mutex with WithExpiry(TTL =
// Config.SessionTimeout), WithFailFast(true) (answer as soon as a majority has
// answered, rather than wait for a blocked instance) and unlimited WithTries bounded
// by the acquire's timeout: the retry delay (redsync's default, 50-250ms at random)
// is cut at the deadline, where it cancels the context, so no try is ever cut off in
// flight. Every failure to lock is fail (redsync holds nothing it did not get a
// majority for within the validity, and unlocks every instance after a failed try):
// fail "timeout" at the deadline; an acquire interrupted by the end of ctx is info. The value is "<CLIENT ID on the first instance>:
// <random>"; sessions report the first instance's connections. Lost is reported
// when the mutex's Until() passes while held.
//
// Release is Mutex.UnlockContext: ok when a majority deleted the key, info when the
// instances that did not answer could have made one, fail "not held" otherwise.
//
// When init names sentinels (Config.SentinelMaster), redsync has one pool, on the
// primary they name (go-redis's failover client, newPrimaryNode), as teams use it
// with one Redis behind Sentinel: its quorum is that one instance. On a Redis
// Cluster (Config.RedisCluster) it has one pool on go-redis's cluster client, as
// teams use it with a cluster: its quorum is the primary of the key's slot.
func NewRedsync(ctx context.Context, cfg Config) (Recipe, error) {
	const name = "redsync"
	if cfg.Fenced {
		return nil, Fail(errors.New("redsync cannot fence: RedLock has no fencing token (no single counter orders the grants of independent instances)"))
	}
	if err := checkRedisConfig(name, cfg, redLockMinServers, false); err != nil {
		return nil, err
	}
	logger := redisLogger(name, &cfg)
	r := &redsyncLock{cfg: cfg, log: logger, io: redisIOTimeout(cfg.SessionTimeout), lease: lease{events: cfg.Events}}
	if cfg.SentinelMaster != "" || cfg.RedisCluster {
		// One pool on the primary the sentinels name, or on the cluster client, as
		// teams use redsync with one Redis or a cluster: a quorum of one.
		// Dialled again until the session timeout, as redis-lock's one node is: a
		// worker that starts while the primary is down (killed, before its failover)
		// waits for the promotion instead of failing at its first refused dial.
		nodes, err := redisDial(ctx, cfg.Servers[:1], 1, cfg.SessionTimeout, 3*r.io, logger, func(int) *redisNode {
			return newPrimaryNode(cfg, fmt.Sprintf("zlc-worker-%d", cfg.Worker), func(id int64) { cfg.Events.Session(id, nil) })
		})
		if err != nil {
			return nil, fmt.Errorf("recipe %s: %w", name, err)
		}
		r.nodes = nodes
	} else {
		nodes, err := newRedisNodes(ctx, name, cfg, logger)
		if err != nil {
			return nil, err
		}
		r.nodes = nodes
	}
	pools := make([]redsyncredis.Pool, len(r.nodes))
	for i, n := range r.nodes {
		pools[i] = goredis.NewPool(n.client)
	}
	r.use(pools)
	return r, nil
}

// use makes the recipe's redsync over pools, one an instance of its quorum.
func (r *redsyncLock) use(pools []redsyncredis.Pool) {
	r.rs, r.instances = redsync.New(pools...), len(pools)
}

// newRedisNodes makes one node per address; the first reports its connections as
// sessions. RedLock works while a majority can be reached, so it waits (redisDial) for
// a majority to answer, for up to the session timeout, and logs the others.
func newRedisNodes(ctx context.Context, name string, cfg Config, logger *log.Logger) ([]*redisNode, error) {
	nodes, err := redisDial(ctx, cfg.Servers, len(cfg.Servers)/2+1, cfg.SessionTimeout, 3*redisIOTimeout(cfg.SessionTimeout), logger,
		func(i int) *redisNode {
			var session func(int64)
			if i == 0 {
				session = func(id int64) { cfg.Events.Session(id, nil) }
			}
			return newRedisNode(cfg.Servers[i], cfg.SessionTimeout, fmt.Sprintf("zlc-worker-%d", cfg.Worker), cfg.RedisDialer, session)
		})
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	return nodes, nil
}

// redsyncLock is the redsync recipe.
type redsyncLock struct {
	cfg   Config
	log   *log.Logger
	nodes []*redisNode
	rs    *redsync.Redsync
	// instances is the number of redsync's pools, the instances of its quorum.
	instances int
	// keys, when set, are the keys each pool renames the mutex's name to
	// (redsync-one-cluster); nil: every instance has the mutex's name.
	keys  []string
	io    time.Duration
	lease lease
	// mutex is the last mutex locked, nil after a release; request goroutine only.
	mutex *redsync.Mutex
}

var _ Recipe = (*redsyncLock)(nil)

// Acquire implements Recipe.
func (r *redsyncLock) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if err := r.lease.begin(req, r.mutex != nil); err != nil {
		return Grant{}, err
	}
	r.mutex = nil
	deadline := deadlineOf(req.Timeout)
	for {
		m, gen, err := r.lock(ctx, deadline)
		if err != nil {
			return Grant{}, err
		}
		if id, now := r.nodes[0].current(); now == gen {
			r.mutex = m
			r.lease.grant(m.Until(), true)
			// The same key (or r.keys) and value on every instance; the session is
			// the first's.
			keys := r.keys
			if keys == nil {
				keys = []string{m.Name()}
			}
			return Grant{Lock: &workloads.LockPlace{Session: FormatSessionID(id), Keys: keys, Value: m.Value()}}, nil
		}
		const why = "the first instance's connection changed under the acquire, so the value names a closed one"
		if err := r.unlock(context.Background(), m); err != nil && !errors.Is(err, errNotHeldByMajority) {
			return Grant{}, Info(fmt.Errorf("locked, but %s, and unlocking failed: %w", why, err))
		}
		r.log.Printf("locked, but %s: unlocked; again", why)
	}
}

// lock runs LockContext on a new mutex until deadline (zero: until ctx ends). It
// returns the mutex and the first instance's connection generation its value names,
// or a classified error.
func (r *redsyncLock) lock(ctx context.Context, deadline time.Time) (*redsync.Mutex, uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timedOut := false
	delay := func(int) time.Duration {
		d := 50*time.Millisecond + randomDuration(200*time.Millisecond)
		if deadline.IsZero() {
			return d
		}
		left := time.Until(deadline)
		if left <= 0 {
			timedOut = true
			cancel() // LockContext returns before another try
		}
		return max(min(d, left), time.Millisecond)
	}
	var gen uint64
	value := func() (string, error) {
		var id int64
		id, gen = r.nodes[0].current()
		token, err := randomToken()
		return lockValue(id, token), err
	}
	m := r.rs.NewMutex(r.cfg.Path, redsync.WithExpiry(r.cfg.SessionTimeout), redsync.WithTries(math.MaxInt32),
		redsync.WithRetryDelayFunc(delay), redsync.WithFailFast(true), redsync.WithGenValueFunc(value))
	err := m.LockContext(ctx)
	switch {
	case err == nil:
		return m, gen, nil
	case timedOut:
		return nil, 0, Fail(ErrTimeout)
	case ctx.Err() != nil:
		return nil, 0, Info(fmt.Errorf("acquire interrupted: %w", ctx.Err()))
	}
	return nil, 0, Fail(fmt.Errorf("lock: %w", err))
}

// errNotHeldByMajority is the cause of an unlock that certainly deleted the key on no
// majority.
var errNotHeldByMajority = errors.New("not held: no majority of the instances held this worker's value")

// unlock runs UnlockContext, bounded by twice the request timeout, and classifies
// its outcome.
func (r *redsyncLock) unlock(ctx context.Context, m *redsync.Mutex) error {
	ctx, cancel := context.WithTimeout(ctx, 2*r.io)
	defer cancel()
	ok, err := m.UnlockContext(ctx)
	if ok {
		return nil
	}
	quorum := r.instances/2 + 1
	if unanswered := countRedsyncNodeErrors(err); unanswered > 0 && unanswered+countDeleted(err, r.instances) >= quorum {
		return Info(fmt.Errorf("unlock: %w", err))
	}
	return Fail(fmt.Errorf("%w (%v)", errNotHeldByMajority, err))
}

// countRedsyncNodeErrors counts the instances an operation could not talk to
// (redsync.RedisError) in redsync's joined error.
func countRedsyncNodeErrors(err error) int {
	if err == nil {
		return 0
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range joined.Unwrap() {
			n += countRedsyncNodeErrors(e)
		}
		return n
	}
	var re *redsync.RedisError
	if errors.As(err, &re) {
		return 1
	}
	return 0
}

// countDeleted is how many instances deleted the key in an unlock that failed with
// err: those that reported neither an error, nor a taken key, nor an expired one.
func countDeleted(err error, nodes int) int {
	return max(nodes-countLeaves(err), 0)
}

// countLeaves counts the errors joined in err.
func countLeaves(err error) int {
	if err == nil {
		return 0
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range joined.Unwrap() {
			n += countLeaves(e)
		}
		return n
	}
	return 1
}

// Release implements Recipe.
func (r *redsyncLock) Release(ctx context.Context) error {
	m := r.mutex
	r.mutex = nil
	held := r.lease.end()
	if m == nil {
		return Fail(errors.New("not held"))
	}
	err := r.unlock(ctx, m)
	if !held {
		if err != nil {
			r.log.Printf("release after lost: %v", err)
		}
		return Fail(errValidityRanOut)
	}
	return err
}

// Close implements Recipe: it unlocks a lock still held (best effort) and closes
// the connections.
func (r *redsyncLock) Close() error {
	if r.mutex != nil && r.lease.end() {
		if err := r.unlock(context.Background(), r.mutex); err != nil {
			r.log.Printf("close: unlocking: %v", err)
		}
	}
	r.mutex = nil
	closeRedisNodes(r.nodes)
	return nil
}
