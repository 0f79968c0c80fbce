package recipes

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"
)

// redLockMutant is a deliberately broken variant of the hand-written RedLock.
type redLockMutant int

// The hand-written RedLock's variants. redsync cannot express these bugs (its quorum
// and its validity check are not options), hence a RedLock of this package's own,
// on go-redis, used by the mutants only; redLockCorrect is their control in tests.
const (
	redLockCorrect redLockMutant = iota
	// redLockMinority counts N/2 instances (a minority) as success.
	redLockMinority
	// redLockNoElapsedCheck grants on a majority however long the requests took,
	// with a validity of the full TTL from the replies.
	redLockNoElapsedCheck
)

// redLockVariants names the hand-written RedLock's mutants for the catalogue.
var redLockVariants = []struct {
	m    redLockMutant
	name string
	doc  string
}{
	{redLockMinority, "mutant-redlock-minority", "hand-written RedLock on go-redis (redsync has no quorum option) counting N/2 instances, a minority, as success: two clients cut off from each other both lock"},
	{redLockNoElapsedCheck, "mutant-redlock-no-elapsed-check", "hand-written RedLock on go-redis (redsync always checks) granting on a majority without the elapsed-time check, valid for the full TTL from the replies: a client paused while its replies were in flight holds keys that expired"},
}

// redLockVariant returns the constructor of the hand-written RedLock variant m.
func redLockVariant(m redLockMutant) Constructor {
	return func(ctx context.Context, cfg Config) (Recipe, error) {
		r, err := newRedLock(ctx, cfg, m)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// redLock is the hand-written RedLock: SET NX PX with one value on every instance at
// once, each request bounded by 5% of the TTL (redsync's default); a grant needs a
// quorum of OKs and, from a monotonic reading before the requests, time left of the
// TTL less the drift allowance; a failed try deletes the value everywhere (Lua
// compare-and-delete) and polls again after a 1-10ms random pause. Release deletes it
// everywhere and is ok when a quorum deleted it. Values and sessions are as redsync's.
type redLock struct {
	name   string
	mutant redLockMutant
	cfg    Config
	log    *log.Logger
	nodes  []*redisNode
	quorum int
	io     time.Duration
	lease  lease
	// afterReplies, when set (by tests), runs between the replies and the check of
	// the elapsed time: a client paused there, its replies already read.
	afterReplies func()
	// value is the value of the last grant, "" after a release; request goroutine only.
	value string
}

var _ Recipe = (*redLock)(nil)

func newRedLock(ctx context.Context, cfg Config, m redLockMutant) (*redLock, error) {
	name := "redlock"
	for _, v := range redLockVariants {
		if v.m == m {
			name = v.name
		}
	}
	if cfg.Fenced {
		return nil, Fail(fmt.Errorf("%s cannot fence: RedLock has no fencing token", name))
	}
	if err := checkRedisConfig(name, cfg, redLockMinServers, false); err != nil {
		return nil, err
	}
	logger := redisLogger(name, &cfg)
	r := &redLock{name: name, mutant: m, cfg: cfg, log: logger, quorum: len(cfg.Servers)/2 + 1,
		io:    min(max(cfg.SessionTimeout/20, 10*time.Millisecond), redisIOTimeout(cfg.SessionTimeout)),
		lease: lease{events: cfg.Events}}
	if m == redLockMinority {
		r.quorum = len(cfg.Servers) / 2
	}
	nodes, err := newRedisNodes(ctx, name, cfg, logger)
	if err != nil {
		return nil, err
	}
	r.nodes = nodes
	return r, nil
}

// Acquire implements Recipe.
func (r *redLock) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if err := r.lease.begin(req, r.value != ""); err != nil {
		return Grant{}, err
	}
	r.value = ""
	deadline := deadlineOf(req.Timeout)
	for {
		ok, err := r.try(ctx)
		if ok || err != nil {
			return Grant{}, err
		}
		if err := pollWait(ctx, deadline, pollBackoff(), nil); err != nil {
			return Grant{}, err
		}
	}
}

// try makes one RedLock attempt: ok when granted; an error only when deleting the
// value after a failed attempt had an unknown outcome somewhere (info).
func (r *redLock) try(ctx context.Context) (bool, error) {
	id, gen := r.nodes[0].current()
	token, err := randomToken()
	if err != nil {
		return false, Fail(err)
	}
	value := lockValue(id, token)
	start := time.Now()
	n := r.onAll(ctx, func(ctx context.Context, node *redisNode) (bool, error) {
		return node.client.SetNX(ctx, r.cfg.Path, value, r.cfg.SessionTimeout).Result()
	})
	if r.afterReplies != nil {
		r.afterReplies()
	}
	now := time.Now()
	until := start.Add(r.cfg.SessionTimeout - redisDrift(r.cfg.SessionTimeout))
	if r.mutant == redLockNoElapsedCheck {
		until = now.Add(r.cfg.SessionTimeout)
	}
	if _, g := r.nodes[0].current(); n >= r.quorum && now.Before(until) && g == gen {
		r.value = value
		r.lease.grant(until, true)
		return true, nil
	}
	if deleted, unknown := r.deleteEverywhere(value); unknown > 0 && deleted+unknown >= r.quorum {
		return false, Info(fmt.Errorf("not locked (%d of %d instances), and deleting the value had an unknown outcome on %d", n, len(r.nodes), unknown))
	}
	return false, nil
}

// deleteEverywhere deletes value's key on every instance that holds it, and counts
// the instances where it did, and those where the outcome is unknown.
func (r *redLock) deleteEverywhere(value string) (deleted, unknown int) {
	var mu sync.Mutex
	r.onAll(context.Background(), func(ctx context.Context, node *redisNode) (bool, error) {
		n, err := redisReleaseScript.Run(ctx, node.client, []string{r.cfg.Path}, value).Int64()
		mu.Lock()
		defer mu.Unlock()
		if err != nil && !redisDefinite(err) {
			unknown++
		}
		if n == 1 {
			deleted++
		}
		return n == 1, err
	})
	return deleted, unknown
}

// onAll runs op on every instance at once, each bounded by the per-instance timeout,
// and counts those where it returned true.
func (r *redLock) onAll(ctx context.Context, op func(context.Context, *redisNode) (bool, error)) int {
	results := make(chan bool, len(r.nodes))
	for _, node := range r.nodes {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, r.io)
			defer cancel()
			ok, err := op(ctx, node)
			if err != nil {
				r.log.Printf("%s: %v", node.addr, err)
			}
			results <- ok
		}()
	}
	n := 0
	for range r.nodes {
		if <-results {
			n++
		}
	}
	return n
}

// Release implements Recipe.
func (r *redLock) Release(ctx context.Context) error {
	value := r.value
	r.value = ""
	held := r.lease.end()
	if value == "" {
		return Fail(errors.New("not held"))
	}
	deleted, unknown := r.deleteEverywhere(value)
	switch {
	case !held:
		return Fail(errValidityRanOut)
	case deleted >= r.quorum:
		return nil
	case deleted+unknown >= r.quorum:
		return Info(fmt.Errorf("release: deleted on %d instances, outcome unknown on %d", deleted, unknown))
	}
	return Fail(fmt.Errorf("not held: deleted on %d of %d instances, fewer than %d", deleted, len(r.nodes), r.quorum))
}

// Close implements Recipe: it releases a lock still held (best effort) and closes
// the connections.
func (r *redLock) Close() error {
	if r.value != "" && r.lease.end() {
		r.deleteEverywhere(r.value)
	}
	r.value = ""
	closeRedisNodes(r.nodes)
	return nil
}
