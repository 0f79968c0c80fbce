package recipes

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// The Redis recipes share this file's plumbing: one go-redis client per instance,
// configured for a lock rather than for throughput (redisOptions), the CLIENT ID of
// its one connection (redisNode), the lock value that names it (lockValue), the
// classification of go-redis errors (redisDefinite), and the validity watch that
// reports lost (lease).

// redisIOTimeout bounds one request to one Redis instance (dial, write, read): a
// quarter of the lock's TTL, between 10ms and 1s, so that an answer that comes at all
// comes while the lock it grants is still valid.
func redisIOTimeout(ttl time.Duration) time.Duration { return redisopt.IOTimeout(ttl) }

// redisDrift is the clock-drift allowance taken off a lock's validity, as Redis's
// lock page does for RedLock: 1% of the TTL plus 2ms, so that a server whose clock
// runs a little fast has not yet expired the key when the holder's validity ends.
func redisDrift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// redisOptions configures a go-redis client of one instance for a lock
// (redisopt.Lock), its timeouts redisIOTimeout(ttl), named name, onConnect learning
// each new connection's CLIENT ID, dialling with dial (Config.RedisDialer) when set.
func redisOptions(addr string, ttl time.Duration, name string, dial redisDialer, onConnect func(context.Context, *redis.Conn) error) *redis.Options {
	o := redisopt.Lock(addr, redisIOTimeout(ttl))
	o.ClientName, o.OnConnect = name, onConnect
	if dial != nil {
		o.Dialer = dial
	}
	return o
}

// redisDialer is go-redis's Options.Dialer.
type redisDialer = func(ctx context.Context, network, addr string) (net.Conn, error)

// redisNode is a go-redis client of one Redis instance (redisOptions) that learns
// the CLIENT ID of each connection it opens, in go-redis's OnConnect hook, before the
// connection carries any command.
type redisNode struct {
	addr   string
	client redis.UniversalClient
	// session, if set, is told each new connection's id; it must not block.
	session func(id int64)
	// sentinels: the client finds its primary through sentinels (newPrimaryNode).
	sentinels bool
	// cluster, for a node of a Redis Cluster (newClusterNode): its id and gen are
	// those of its connection to the primary of the lock key's slot.
	cluster *clusterConns

	mu  sync.Mutex
	id  int64  // the current connection's CLIENT ID; 0 before the first
	gen uint64 // counts connections
}

// newRedisNode makes the client; it connects on first use (see connect).
func newRedisNode(addr string, ttl time.Duration, name string, dial redisDialer, session func(int64)) *redisNode {
	n := &redisNode{addr: addr, session: session}
	n.client = redis.NewClient(redisOptions(addr, ttl, name, dial, n.onConnect))
	return n
}

// newPrimaryNode is the node of a lock on one primary: the instance cfg.Servers[0],
// or, when init named sentinels (cfg.SentinelMaster), the primary they name,
// followed across a promotion by go-redis's failover client (redisopt.Failover),
// or, when init named a Redis Cluster (cfg.RedisCluster), the primary that serves
// the lock key's slot (newClusterNode).
func newPrimaryNode(cfg Config, name string, session func(int64)) *redisNode {
	if cfg.RedisCluster {
		return newClusterNode(cfg, name, session)
	}
	if cfg.SentinelMaster == "" {
		return newRedisNode(cfg.Servers[0], cfg.SessionTimeout, name, cfg.RedisDialer, session)
	}
	n := &redisNode{addr: fmt.Sprintf("primary %s of sentinels %s", cfg.SentinelMaster, strings.Join(cfg.Servers, ",")), session: session, sentinels: true}
	o := redisopt.Failover(cfg.SentinelMaster, cfg.Servers, redisIOTimeout(cfg.SessionTimeout))
	o.ClientName, o.OnConnect = name, n.onConnect
	n.client = redis.NewFailoverClient(o)
	return n
}

// onConnect is go-redis's OnConnect hook: it asks the new connection its CLIENT ID.
// A failover client calls it for its connections to the sentinels too, which are
// not the lock's: those it leaves alone.
func (n *redisNode) onConnect(ctx context.Context, cn *redis.Conn) error {
	if n.sentinels {
		role, err := cn.Do(ctx, "ROLE").Slice()
		if err != nil {
			return fmt.Errorf("ROLE: %w", err)
		}
		if len(role) > 0 && role[0] == "sentinel" {
			return nil
		}
	}
	id, err := cn.ClientID(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLIENT ID: %w", err)
	}
	n.mu.Lock()
	n.id = id
	n.gen++
	n.mu.Unlock()
	if n.session != nil {
		n.session(id)
	}
	return nil
}

// current returns the CLIENT ID of the connection commands go through now, and the
// generation that changes with every new connection.
func (n *redisNode) current() (id int64, gen uint64) {
	if n.cluster != nil {
		return n.cluster.current(n.session)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.id, n.gen
}

// connect makes sure the node has a connection (and so an id), waiting at most wait.
func (n *redisNode) connect(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if n.cluster != nil {
		return n.cluster.connect(ctx, n.addr, n.session)
	}
	if err := n.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connecting to %s: %w", n.addr, err)
	}
	return nil
}

// redisInitPause is the pause between two rounds of an init's attempts to reach its
// instances (redisDial).
const redisInitPause = 100 * time.Millisecond

// redisDial makes one node per address (newNode(i)) and connects them all at once,
// then again, every redisInitPause, those that did not answer, until at least need
// of them answered: for up to wait (the session timeout, as long as a ZooKeeper client
// waits for its session) or until ctx ends. Each attempt is bounded by attempt (and
// by the time left) and uses a fresh client: go-redis's pool, once a dial failed,
// answers with that error for up to a second without dialing again.
//
// It returns every node, those that never answered included (they connect on first
// use), or closes them all and returns a plain error, not Fail: a fault may have cut
// the worker off from its instances for a while (a killed or paused server, a
// partition), and the harness retries the slot, as it does for a ZooKeeper worker
// whose session did not come.
func redisDial(ctx context.Context, addrs []string, need int, wait, attempt time.Duration, logger *log.Logger,
	newNode func(i int) *redisNode) ([]*redisNode, error) {
	nodes := make([]*redisNode, len(addrs))
	for i := range addrs {
		nodes[i] = newNode(i)
	}
	start := time.Now()
	deadline := start.Add(wait)
	errs := make([]error, len(nodes))
	for round := 0; ; round++ {
		var wg sync.WaitGroup
		for i, n := range nodes {
			if round > 0 && errs[i] == nil {
				continue
			}
			if round > 0 {
				n.client.Close()
				n = newNode(i)
				nodes[i] = n
			}
			limit := min(attempt, max(time.Until(deadline), time.Millisecond))
			wg.Go(func() { errs[i] = n.connect(ctx, limit) })
		}
		wg.Wait()
		reached := 0
		for _, err := range errs {
			if err == nil {
				reached++
			}
		}
		if reached >= need {
			if round > 0 {
				logger.Printf("reached %d of %d Redis instances after %s", reached, len(nodes), time.Since(start).Round(time.Millisecond))
			}
			for _, err := range errs {
				if err != nil {
					logger.Printf("%v (RedLock goes on with the others)", err)
				}
			}
			return nodes, nil
		}
		if round == 0 {
			logger.Printf("reached %d of %d Redis instances, need %d: trying again for up to %s: %v",
				reached, len(nodes), need, wait, errors.Join(errs...))
		}
		fail := func(why string) ([]*redisNode, error) {
			closeRedisNodes(nodes)
			var missing []error
			for _, err := range errs {
				if err != nil {
					missing = append(missing, err)
				}
			}
			if len(nodes) == 1 {
				return nil, fmt.Errorf("%s: %w", why, missing[0])
			}
			return nil, fmt.Errorf("%s: reached %d of %d Redis instances, fewer than %d: %w",
				why, reached, len(nodes), need, errors.Join(missing...))
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fail(fmt.Sprintf("gave up after %s (the session timeout)", time.Since(start).Round(time.Millisecond)))
		}
		t := time.NewTimer(min(redisInitPause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fail(fmt.Sprintf("interrupted after %s: %v", time.Since(start).Round(time.Millisecond), ctx.Err()))
		case <-t.C:
		}
	}
}

// closeRedisNodes closes every node's client.
func closeRedisNodes(nodes []*redisNode) {
	for _, n := range nodes {
		n.client.Close()
	}
}

// lockValue is the value a recipe locks with: the CLIENT ID of the connection that
// sets it, as the session event spells it ("0x1f"), a colon, and token. The harness
// attributes a key to a live client by it (GET key, CLIENT LIST).
func lockValue(id int64, token string) string {
	return FormatSessionID(id) + ":" + token
}

// randomToken returns 20 random bytes in hex, unique across all clients and all
// acquisitions, as Redis's lock page asks of a lock value.
func randomToken() (string, error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random lock value: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// redisDefinite reports whether a go-redis error certainly left the server unchanged:
// an error reply (the server refused: READONLY, OOM, NOPERM...; the recipes' scripts
// cannot fail halfway), or a request that was never sent (dial failure, no pooled
// connection, client closed). Timeouts and broken connections after sending are not.
func redisDefinite(err error) bool {
	var reply redis.Error
	var op *net.OpError
	switch {
	case errors.As(err, &reply):
		return true
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted), errors.Is(err, redis.ErrClosed):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	}
	return false
}

// redisMoved reports whether err is a Redis Cluster's redirection (MOVED or ASK):
// the instance asked does not serve the key's slot, and did nothing.
func redisMoved(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// redisReply reports whether err is an error reply of the server.
func redisReply(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && !errors.Is(err, redis.Nil)
}

// checkRedisConfig refuses what a Redis recipe named name cannot do: kinds other than
// mutex (and counter, with counter), several permits, a missing key or TTL, fewer
// than minServers addresses.
func checkRedisConfig(name string, cfg Config, minServers int, counter bool) error {
	switch {
	case cfg.Kind != workloads.Mutex && (cfg.Kind != workloads.Counter || !counter):
		return Fail(fmt.Errorf("recipe %s does not support kind %s", name, cfg.Kind))
	case cfg.Permits > 1:
		return Fail(fmt.Errorf("recipe %s: a mutex has one permit, got permits %d", name, cfg.Permits))
	case cfg.SessionTimeout <= 0 || cfg.Path == "":
		return Fail(fmt.Errorf("recipe %s: Config needs Servers, SessionTimeout (the TTL) and Path (the key)", name))
	case len(cfg.Servers) == 0:
		return Fail(fmt.Errorf("recipe %s: no Redis address in connect", name))
	case len(cfg.Servers) < minServers:
		return Fail(fmt.Errorf("recipe %s: RedLock needs at least %d independent Redis primaries, got %d (%v)",
			name, minServers, len(cfg.Servers), cfg.Servers))
	}
	return nil
}

// redisLogger returns the recipe's logger and fills in cfg's defaults.
func redisLogger(name string, cfg *Config) *log.Logger {
	w := cfg.Log
	if w == nil {
		w = io.Discard
	}
	if cfg.Events == nil {
		cfg.Events = nopEvents{}
	}
	return log.New(w, fmt.Sprintf("%s[%d] ", name, cfg.Worker), log.LstdFlags|log.Lmicroseconds)
}

// lease tracks whether a Redis recipe holds its lock and, when watched, reports
// Lost("validity ran out") when the lock's validity passes while held. Its timer runs
// concurrently with Serve's calls.
type lease struct {
	events Events

	mu    sync.Mutex
	held  bool
	gen   uint64
	timer *time.Timer
}

// grant records a hold that is valid until until (a time with a monotonic reading);
// with watch, lost is reported when until passes while still held. It returns the
// hold's generation, which extend and lose name.
func (l *lease) grant(until time.Time, watch bool) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopLocked()
	l.held = true
	gen := l.gen
	if watch {
		l.timer = time.AfterFunc(time.Until(until), func() { l.lose(gen, "validity ran out") })
	}
	return gen
}

// extend moves hold gen's validity to until, if gen is still held, and reports the
// renewal (the server has just confirmed the lease is the holder's); false when it is
// not held (released, or lost already reported).
func (l *lease) extend(gen uint64, until time.Time) bool {
	l.mu.Lock()
	held := l.gen == gen && l.held
	if held && l.timer != nil {
		l.timer.Reset(time.Until(until))
	}
	l.mu.Unlock()
	if held {
		l.events.Renewed()
	}
	return held
}

// lose ends hold gen, if it is still the current one, and reports lost with why.
func (l *lease) lose(gen uint64, why string) {
	l.mu.Lock()
	lost := l.gen == gen && l.held
	if lost {
		l.held = false
		if l.timer != nil {
			l.timer.Stop()
		}
	}
	l.mu.Unlock()
	if lost {
		l.events.Lost(why)
	}
}

// begin starts an acquire of a Redis mutex: a mode is refused (a mutex has none), as
// is an acquire while the previous one (held says the recipe has it) still holds; a
// hold that ran out is forgotten. The recipe then drops its handle on the old hold.
func (l *lease) begin(req AcquireRequest, held bool) error {
	if req.Mode != "" {
		return Fail(fmt.Errorf("kind mutex has no modes, got mode %q", req.Mode))
	}
	if held && l.holding() {
		return Fail(errors.New("already held"))
	}
	l.end()
	return nil
}

// end forgets the hold and reports whether it was still held (no lost reported).
func (l *lease) end() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.held
	l.stopLocked()
	l.held = false
	return held
}

// holding reports whether the lock is held and its validity has not run out.
func (l *lease) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

func (l *lease) stopLocked() {
	l.gen++
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// errValidityRanOut is the cause of a release after lost was reported.
var errValidityRanOut = errors.New("not held: its validity ran out before the release")

// pollBackoff is the randomized pause between two polls of a contended lock,
// 1-10ms: short against the TTL, random so that contenders do not march in step.
func pollBackoff() time.Duration {
	var b [1]byte
	_, _ = rand.Read(b[:])
	return time.Millisecond + time.Duration(b[0])*9*time.Millisecond/255
}

// randomDuration returns a uniformly random duration in [0, n), n > 0, from
// crypto/rand as every random draw of the Redis recipes is (a test can seed it:
// testing/cryptotest, as redsim does to replay a run).
func randomDuration(n time.Duration) time.Duration {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return time.Duration(binary.LittleEndian.Uint64(b[:]) % uint64(n))
}

// pollWait pauses before the next poll of an acquire that runs until deadline (zero:
// until ctx ends). It returns Fail(ErrTimeout) once the deadline has passed (naming
// lastErr, the last error that did not end the acquire), or Fail when ctx ends: no
// request is in flight here, so nothing is held.
func pollWait(ctx context.Context, deadline time.Time, pause time.Duration, lastErr error) error {
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			if lastErr != nil {
				return Fail(fmt.Errorf("%w (last error: %v)", ErrTimeout, lastErr))
			}
			return Fail(ErrTimeout)
		}
		pause = min(pause, left)
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return Fail(fmt.Errorf("acquire interrupted between polls: %w", ctx.Err()))
	case <-t.C:
		return nil
	}
}

// deadlineOf is the end of an acquire that may wait timeout; zero for no timeout.
func deadlineOf(timeout time.Duration) time.Time {
	if timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(timeout)
}
