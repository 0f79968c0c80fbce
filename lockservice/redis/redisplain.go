package redis

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// redisPlainRelease deletes KEYS[1] if it holds ARGV[1]: 1 if deleted, else 0.
const redisPlainRelease = `if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`

// PlainLoops is the plain Redis client loop, the yardstick of a Redis run
// (--baseline, and its warm-up): n goroutines, each with its own go-redis client of
// every instance it locks (dialled from the harness through Dial), loop acquire,
// hold(i), release on key path for d, and count cycles and failed requests. It
// records nothing.
//
// Acquire is SET path value NX PX ttl (ttl = sessionTimeout, as the recipes use) with
// a fresh random value, polled every 1-10 ms at random while the key is taken; release
// is a Lua compare-and-delete. On one instance (single) and on replicas the loop locks
// instance 1, the primary; in a cluster the primary that serves path's slot. On the redlock topology it is plain RedLock: SET NX PX on
// every instance at once, granted when a majority set it within the TTL less a drift
// allowance, else the keys it did set are released and it polls again; release is the
// compare-and-delete on every instance, which must delete a majority. Every instance
// must answer PING before the clock starts, or PlainLoops fails naming it.
func (r *Redis) PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error) {
	b := lockservice.Baseline{Goroutines: n, Duration: d}
	home, err := r.home(ctx, path)
	if err != nil {
		return b, fmt.Errorf("baseline: %w", err)
	}
	addrs := []string{home.ClientAddr()}
	if r.cfg.Topology == RedisRedlock {
		addrs = strings.Split(r.Connect(), ",")
	}
	loops := make([]*redisPlain, n)
	for i := range loops {
		l := newRedisPlain(r.Dial, addrs, path, sessionTimeout)
		defer l.close()
		if err := l.ping(ctx); err != nil {
			return b, fmt.Errorf("baseline client %d: %w", i, err)
		}
		loops[i] = l
	}
	deadline := time.Now().Add(d)
	counts := make([]lockservice.LoopCount, n)
	var wg sync.WaitGroup
	for i, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i] = l.loop(ctx, deadline, func() time.Duration { return hold(i) })
		}()
	}
	wg.Wait()
	lockservice.SumCounts(counts).Fill(&b)
	return b, nil
}

// redisPlain is one goroutine of the plain Redis loop: a client of each instance it
// locks (one, or RedLock's independent primaries).
type redisPlain struct {
	addrs    []string
	clients  []*redis.Client
	key      string
	ttl      time.Duration
	validity time.Duration // the TTL less RedLock's drift allowance
	release  *redis.Script
}

// newRedisPlain makes the clients (each dials on first use, through dial): one
// connection each, no retries, requests bounded by a quarter of the TTL (10 ms..1 s),
// as the recipes' clients are configured.
func newRedisPlain(dial func(context.Context, string, time.Duration) (net.Conn, error), addrs []string, key string, ttl time.Duration) *redisPlain {
	limit := redisopt.IOTimeout(ttl)
	l := &redisPlain{addrs: addrs, key: key, ttl: ttl, validity: ttl - ttl/100 - 2*time.Millisecond,
		release: redis.NewScript(redisPlainRelease)}
	for _, addr := range addrs {
		o := redisopt.Lock(addr, limit)
		o.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr, limit) }
		l.clients = append(l.clients, redis.NewClient(o))
	}
	return l
}

// close closes the clients.
func (l *redisPlain) close() {
	for _, c := range l.clients {
		_ = c.Close()
	}
}

// ping opens each client's connection: every instance must answer PING.
func (l *redisPlain) ping(ctx context.Context) error {
	_, err := l.each(func(c *redis.Client) (bool, error) {
		return true, c.Ping(ctx).Err()
	})
	return err
}

// quorum is how many instances must agree: all of one, a majority of RedLock's.
func (l *redisPlain) quorum() int { return len(l.clients)/2 + 1 }

// each runs f on every client, at once when there are several, and returns how many
// said true and every error, each naming its instance.
func (l *redisPlain) each(f func(c *redis.Client) (bool, error)) (int, error) {
	if len(l.clients) == 1 {
		ok, err := f(l.clients[0])
		if err != nil {
			return 0, fmt.Errorf("instance %s: %w", l.addrs[0], err)
		}
		return btoi(ok), nil
	}
	oks := make([]bool, len(l.clients))
	errs := make([]error, len(l.clients))
	var wg sync.WaitGroup
	for i, c := range l.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			oks[i], errs[i] = f(c)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("instance %s: %w", l.addrs[i], errs[i])
			}
		}()
	}
	wg.Wait()
	n := 0
	for _, ok := range oks {
		n += btoi(ok)
	}
	return n, errors.Join(errs...)
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// loop runs acquire, hold, release until deadline and counts what it achieved.
func (l *redisPlain) loop(ctx context.Context, deadline time.Time, hold func() time.Duration) lockservice.LoopCount {
	var n lockservice.LoopCount
	for time.Now().Before(deadline) && ctx.Err() == nil {
		start := time.Now()
		value, err := l.acquire(ctx, deadline)
		switch {
		case err != nil:
			n.Errs++
			l.pause()
			continue
		case value == "":
			return n // the deadline came while polling
		}
		n.Acquires = append(n.Acquires, time.Since(start))
		time.Sleep(hold())
		if err := l.unlock(ctx, value); err != nil {
			n.Errs++
			continue
		}
		n.Cycles++
	}
	return n
}

// acquire polls for the lock until deadline and returns its value, "" at the
// deadline. A request that failed is the error (the keys it set undone first).
func (l *redisPlain) acquire(ctx context.Context, deadline time.Time) (string, error) {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		value := crand.Text()
		start := time.Now()
		set, err := l.each(func(c *redis.Client) (bool, error) {
			err := c.Do(ctx, "SET", l.key, value, "NX", "PX", l.ttl.Milliseconds()).Err()
			if errors.Is(err, redis.Nil) {
				return false, nil
			}
			return err == nil, err
		})
		if err == nil && set >= l.quorum() && time.Since(start) < l.validity {
			return value, nil
		}
		if set > 0 {
			_, _ = l.each(func(c *redis.Client) (bool, error) { return l.compareDelete(ctx, c, value) })
		}
		if err != nil {
			return "", err
		}
		l.pause()
	}
	return "", nil
}

// unlock deletes the key where it still holds value: on a quorum, or it is an error.
func (l *redisPlain) unlock(ctx context.Context, value string) error {
	deleted, err := l.each(func(c *redis.Client) (bool, error) { return l.compareDelete(ctx, c, value) })
	switch {
	case err != nil:
		return err
	case deleted < l.quorum():
		return fmt.Errorf("release: the key held the value on %d of %d instances (its TTL ran out?)", deleted, len(l.clients))
	}
	return nil
}

// compareDelete deletes the key on one instance if it holds value.
func (l *redisPlain) compareDelete(ctx context.Context, c *redis.Client, value string) (bool, error) {
	n, err := l.release.Run(ctx, c, []string{l.key}, value).Int64()
	return n == 1, err
}

// pause sleeps 1-10 ms at random: the poll of a taken lock, and the pause after a
// failed request.
func (l *redisPlain) pause() {
	time.Sleep(time.Millisecond + rand.N(9*time.Millisecond))
}
