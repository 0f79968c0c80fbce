package recipes

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// NewRedislock builds the redislock recipe: github.com/bsm/redislock (v0.10.0) on one
// Redis instance (the first address of Config.Servers; under sentinels the primary
// they name; on a Redis Cluster the primary that serves the key's slot,
// newPrimaryNode), over a go-redis client configured as for redis-lock
// (redisOptions). Only kind mutex; it cannot fence
// (redislock has no fencing token), so a fenced init fails.
//
// Acquire is Client.Obtain with the TTL of Config.SessionTimeout and a retry strategy
// that polls every 5ms (redislock's LinearBackoff) and stops at the acquire's timeout;
// Obtain's own context deadline is set a few request timeouts later, so that the
// deadline never cuts a request in flight (an attempt cut off would be info). The
// lock's token (Options.Token, its whole value) is "<CLIENT ID>:<random>", new for
// every acquire. redislock reports no validity: the worker takes it from a monotonic
// reading made as the request that obtained the lock started (a go-redis hook notes
// when each command starts), for the TTL less a drift allowance, and reports lost
// when it runs out while held. Obtain treats every Redis error as final, so a
// server that cannot be reached fails the acquire at once.
//
// Release is Lock.Release: fail "not held" on redislock.ErrLockNotHeld (or after
// lost), info when its outcome is unknown.
func NewRedislock(ctx context.Context, cfg Config) (Recipe, error) {
	const name = "redislock"
	if cfg.Fenced {
		return nil, Fail(errors.New("redislock cannot fence: the library gives no fencing token"))
	}
	if err := checkRedisConfig(name, cfg, 1, false); err != nil {
		return nil, err
	}
	logger := redisLogger(name, &cfg)
	r := &bsmLock{cfg: cfg, log: logger, io: redisIOTimeout(cfg.SessionTimeout), lease: lease{events: cfg.Events}}
	nodes, err := redisDial(ctx, cfg.Servers[:1], 1, cfg.SessionTimeout, 3*r.io, logger, func(int) *redisNode {
		return newPrimaryNode(cfg, fmt.Sprintf("zlc-worker-%d", cfg.Worker), func(id int64) { cfg.Events.Session(id, nil) })
	})
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	r.node = nodes[0]
	r.node.client.AddHook(&r.sent)
	r.client = redislock.New(r.node.client)
	return r, nil
}

// bsmLock is the redislock recipe.
type bsmLock struct {
	cfg    Config
	log    *log.Logger
	node   *redisNode
	client *redislock.Client
	io     time.Duration
	sent   sentHook
	lease  lease
	// lock is the last lock obtained, nil after a release; request goroutine only.
	lock *redislock.Lock
}

var _ Recipe = (*bsmLock)(nil)

// Acquire implements Recipe.
func (r *bsmLock) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if err := r.lease.begin(req, r.lock != nil); err != nil {
		return Grant{}, err
	}
	r.lock = nil
	deadline := deadlineOf(req.Timeout)
	for {
		id, gen := r.node.current()
		token, err := randomToken()
		if err != nil {
			return Grant{}, Fail(err)
		}
		value := lockValue(id, token)
		lock, err := r.obtain(ctx, value, deadline)
		if err != nil {
			return Grant{}, r.obtainError(ctx, err, deadline)
		}
		until := r.sent.last().Add(r.cfg.SessionTimeout - redisDrift(r.cfg.SessionTimeout))
		why := ""
		if _, now := r.node.current(); now != gen {
			why = "the connection changed under the acquire, so the value names a closed one"
		} else if !time.Now().Before(until) {
			why = "the reply came after the lock's validity ran out"
		}
		if why == "" {
			r.lock = lock
			r.lease.grant(until, true)
			return Grant{Lock: &workloads.LockPlace{Session: FormatSessionID(id), Keys: []string{lock.Key()}, Value: value}}, nil
		}
		if err := r.release(lock); err != nil && !errors.Is(err, redislock.ErrLockNotHeld) {
			return Grant{}, Info(fmt.Errorf("obtained, but %s, and releasing it failed: %w", why, err))
		}
		r.log.Printf("obtained, but %s: released; again", why)
	}
}

// obtain runs Client.Obtain until deadline (zero: until ctx ends).
func (r *bsmLock) obtain(ctx context.Context, value string, deadline time.Time) (*redislock.Lock, error) {
	// Obtain sets a deadline of its own (now + TTL) on a context without one, and
	// its retries stop only at the context's end: the retry strategy stops at the
	// acquire's deadline instead, and the context ends later, so that it never
	// cuts the last attempt's requests.
	end := deadline
	if end.IsZero() {
		end = time.Now().Add(24 * time.Hour)
	}
	ctx, cancel := context.WithDeadline(ctx, end.Add(4*r.io))
	defer cancel()
	opt := &redislock.Options{Token: value, RetryStrategy: &untilDeadline{next: redislock.LinearBackoff(5 * time.Millisecond), deadline: deadline}}
	return r.client.Obtain(ctx, r.cfg.Path, r.cfg.SessionTimeout, opt)
}

// obtainError classifies an error of Obtain.
func (r *bsmLock) obtainError(ctx context.Context, err error, deadline time.Time) error {
	switch {
	case errors.Is(err, redislock.ErrNotObtained) && ctx.Err() != nil:
		return Fail(fmt.Errorf("acquire interrupted between polls: %w", ctx.Err()))
	case errors.Is(err, redislock.ErrNotObtained):
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return Fail(ErrTimeout)
		}
		return Fail(err)
	case redisDefinite(err):
		return Fail(fmt.Errorf("obtain: %w", err))
	}
	return Info(fmt.Errorf("obtain: %w", err))
}

// release runs Lock.Release in a request of its own.
func (r *bsmLock) release(lock *redislock.Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.io)
	defer cancel()
	return lock.Release(ctx)
}

// Release implements Recipe.
func (r *bsmLock) Release(ctx context.Context) error {
	lock := r.lock
	r.lock = nil
	held := r.lease.end()
	if lock == nil {
		return Fail(errors.New("not held"))
	}
	err := r.release(lock)
	switch {
	case !held:
		if err != nil {
			r.log.Printf("release after lost: %v", err)
		}
		return Fail(errValidityRanOut)
	case errors.Is(err, redislock.ErrLockNotHeld):
		return Fail(fmt.Errorf("not held: %w", err))
	case err != nil:
		return Info(fmt.Errorf("release: %w", err))
	}
	return nil
}

// Close implements Recipe: it releases a lock still held (best effort) and closes
// the connection.
func (r *bsmLock) Close() error {
	if r.lock != nil && r.lease.end() {
		if err := r.release(r.lock); err != nil {
			r.log.Printf("close: releasing: %v", err)
		}
	}
	r.lock = nil
	return r.node.client.Close()
}

// untilDeadline is a redislock.RetryStrategy: next's backoff, shortened to end at
// deadline, and no more retries (0) once deadline has passed. A zero deadline never
// stops.
type untilDeadline struct {
	next     redislock.RetryStrategy
	deadline time.Time
}

// NextBackoff implements redislock.RetryStrategy.
func (u *untilDeadline) NextBackoff() time.Duration {
	d := u.next.NextBackoff()
	if u.deadline.IsZero() {
		return d
	}
	left := time.Until(u.deadline)
	if left <= 0 {
		return 0
	}
	return min(d, left)
}

// sentHook is a go-redis hook that notes when the latest command started: before
// it was sent, and before any connection it needed was dialled.
type sentHook struct {
	mu sync.Mutex
	at time.Time
}

// last returns the start of the latest command, with its monotonic reading.
func (h *sentHook) last() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at
}

// DialHook implements redis.Hook.
func (h *sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.at = time.Now()
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
