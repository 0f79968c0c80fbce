package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// redisMutant is a deliberately broken variant of redis-lock, or redisCorrect, or
// redisWait (a correct variant that waits for a replica).
type redisMutant int

// The variants of redis-lock. Each mutant changes one thing.
const (
	redisCorrect redisMutant = iota
	// redisBlindDel releases with a plain DEL of the key, whoever holds it.
	redisBlindDel
	// redisNoExpiry locks with SET NX and no expiry.
	redisNoExpiry
	// redisSetNXThenExpire locks with SET NX, then sets the expiry with a second
	// command, PEXPIRE.
	redisSetNXThenExpire
	// redisStaticValue uses one token, shared by every client, and releases by
	// comparing that token.
	redisStaticValue
	// redisIgnoreValidity never reports lost: neither when its validity runs out
	// nor when an extend finds the key gone.
	redisIgnoreValidity
	// redisExtendRecreates extends with a script that also sets the key again when
	// it is missing.
	redisExtendRecreates
	// redisBlindExtend extends with a plain PEXPIRE, whoever's key it is.
	redisBlindExtend
	// redisWait is not a mutant: redis-lock that, after the SET, waits for a
	// replica to have the key (WAIT 1) and gives the grant back when none does.
	redisWait
)

// mutant reports whether m is a deliberately broken variant.
func (m redisMutant) mutant() bool { return m != redisCorrect && m != redisWait }

// redisLockVariants names redis-lock and its mutants for the catalogue.
var redisLockVariants = []struct {
	m    redisMutant
	name string
	doc  string
}{
	{redisCorrect, "redis-lock", "go-redis as Redis's lock page says: SET NX PX with a unique value, Lua compare-and-delete, INCR fencing token in the acquire script, lost when its validity (monotonic, from before the SET) runs out"},
	{redisBlindDel, "mutant-redis-blind-del", "redis-lock releasing with a plain DEL: a holder whose key expired deletes the next holder's key"},
	{redisNoExpiry, "mutant-redis-no-expiry", "redis-lock with SET NX and no expiry: a dead holder's key stays forever"},
	{redisSetNXThenExpire, "mutant-redis-setnx-then-expire", "redis-lock setting the expiry with a second command (PEXPIRE after SET NX): a holder cut off in between leaves a key without TTL"},
	{redisStaticValue, "mutant-redis-static-value", "redis-lock with one token shared by every client (the value's random part), compared on release: one client's release deletes another's lock"},
	{redisIgnoreValidity, "mutant-redis-ignore-validity", "redis-lock never reporting lost when its validity runs out: a holder paused past the TTL overlaps the next"},
	{redisExtendRecreates, "mutant-redis-extend-recreates", "redis-lock whose extend sets the key again when it is missing: a holder whose key the server lost takes it back after another client held it, and never learns it lost the lock"},
	{redisBlindExtend, "mutant-redis-blind-extend", "redis-lock extending with a plain PEXPIRE, whoever's key it is: a holder whose key the server lost renews the next holder's key and goes on holding"},
	{redisWait, "redis-lock-wait", "redis-lock with WAIT 1 after the SET, as Redis's replication page advises: a grant counts once a replica has the key (a failover then promotes one that has it), and is given back when no replica acknowledges it within the request timeout; needs replicas (the replicas, sentinel or cluster topology; on a cluster, a replica of the primary of the key's slot)"},
}

// staticToken is the token every client of mutant-redis-static-value shares.
const staticToken = "mutant-redis-static-value"

// The scripts. KEYS[1] is the lock key, KEYS[2] its fencing counter; ARGV[1] the
// value, ARGV[2] the TTL in milliseconds. An acquire script returns the new fencing
// token, or nil when the key is taken.
var (
	redisAcquireScript = redis.NewScript(`if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return redis.call("INCR", KEYS[2])
end
return false`)
	redisAcquireNoTTLScript = redis.NewScript(`if redis.call("SET", KEYS[1], ARGV[1], "NX") then
	return redis.call("INCR", KEYS[2])
end
return false`)
	// redisReleaseScript deletes the key if it holds ARGV[1]: 1 if deleted, else 0.
	redisReleaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)
	// redisReleaseSuffixScript (mutant-redis-static-value) deletes the key if its
	// value ends with ARGV[1], the shared token.
	redisReleaseSuffixScript = redis.NewScript(`local v = redis.call("GET", KEYS[1])
if v and string.sub(v, -string.len(ARGV[1])) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)
)

// NewRedisLock builds redis-lock: a lock on one Redis instance (the first address of
// Config.Servers; under sentinels the primary they name; on a Redis Cluster the
// primary that serves the key's slot, newPrimaryNode) on go-redis, as Redis's own
// lock page specifies it. Only kind mutex.
//
// Acquire runs one Lua script, SET key value NX PX ttl and, if that set the key, INCR
// of "<key>:fence" ("{<key>}:fence" on a Redis Cluster, in the key's slot), whose
// result is the fencing token; it polls with a 1-10ms random
// pause until the timeout (Fail(ErrTimeout)). The value is "<CLIENT ID>:<20 random
// bytes in hex>", new for every attempt. The validity runs from a monotonic reading
// taken before the request, for the TTL (Config.SessionTimeout) less a drift
// allowance; a grant whose reply comes after that is undone (compare-and-delete) and
// polled again, and lost is reported when the validity runs out while held. While
// held, the lock is extended every third of the TTL (extender: a Lua
// compare-and-PEXPIRE; the validity then runs from the extend's start), and lost is
// reported when an extend finds the key gone or another's. A request whose outcome is unknown (a timeout, a connection broken after
// sending) makes the acquire info, after a best-effort compare-and-delete of its
// value; a refusal by the server is fail.
//
// Release is a Lua compare-and-delete: fail "not held" when the key no longer holds
// the value (or lost was reported), info when its outcome is unknown. Session events
// carry the CLIENT ID of each connection; the acquire is polled again if the
// connection changed under it, so the key always names the connection that set it.
func NewRedisLock(ctx context.Context, cfg Config) (Recipe, error) {
	return newRedisLock(ctx, cfg, redisCorrect)
}

// redisLockVariant returns the constructor of the redis-lock variant m.
func redisLockVariant(m redisMutant) Constructor {
	return func(ctx context.Context, cfg Config) (Recipe, error) { return newRedisLock(ctx, cfg, m) }
}

// redisLock is redis-lock or one of its mutants.
type redisLock struct {
	name   string
	mutant redisMutant
	cfg    Config
	log    *log.Logger
	node   *redisNode
	io     time.Duration
	keys   []string // the lock key and its fencing counter (besideKey)
	// counterFence is the counter's highest token seen (besideKey), "" without a
	// counter.
	counterFence string
	lease        lease
	// value is the value of the last grant, "" after a release; request goroutine only.
	value string
	// ext keeps the current hold alive (nil when none, or for a key without TTL).
	ext *extender
	// token is the last grant's fencing token, shown to the fenced counter; 0 after
	// a release. Request goroutine only.
	token int64
	// primary is the node's client of its one primary (redis-lock-wait's SET and
	// WAIT go there); nil on a cluster, where setClient asks the slot map.
	primary *redis.Client
}

var _ Recipe = (*redisLock)(nil)

func newRedisLock(ctx context.Context, cfg Config, m redisMutant) (Recipe, error) {
	name := redisLockVariants[m].name
	if err := checkRedisConfig(name, cfg, 1, true); err != nil {
		return nil, err
	}
	fence, err := besideKey(cfg, cfg.Path, ":fence")
	if err != nil {
		return nil, Fail(fmt.Errorf("recipe %s: %w", name, err))
	}
	logger := redisLogger(name, &cfg)
	r := &redisLock{name: name, mutant: m, cfg: cfg, log: logger, io: redisIOTimeout(cfg.SessionTimeout),
		keys: []string{cfg.Path, fence}, lease: lease{events: cfg.Events}}
	if cfg.CounterPath != "" {
		if r.counterFence, err = besideKey(cfg, cfg.CounterPath, ":fence"); err != nil {
			return nil, Fail(fmt.Errorf("recipe %s: %w", name, err))
		}
	}
	nodes, err := redisDial(ctx, cfg.Servers[:1], 1, cfg.SessionTimeout, 3*r.io, logger, func(int) *redisNode {
		return newPrimaryNode(cfg, fmt.Sprintf("zlc-worker-%d", cfg.Worker), func(id int64) { cfg.Events.Session(id, nil) })
	})
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	r.node = nodes[0]
	r.primary, _ = r.node.client.(*redis.Client)
	return r, nil
}

// Acquire implements Recipe.
func (r *redisLock) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if err := r.lease.begin(req, r.value != ""); err != nil {
		return Grant{}, err
	}
	r.ext.halt()
	r.value, r.ext, r.token = "", nil, 0
	deadline := deadlineOf(req.Timeout)
	var lastErr error
	for {
		g, ok, err := r.try(ctx)
		switch {
		case ok:
			return g, nil
		case errors.Is(err, errPollAgain):
			lastErr = err
			r.log.Printf("acquire: %v", err)
		case err != nil:
			return Grant{}, err
		}
		if err := pollWait(ctx, deadline, pollBackoff(), lastErr); err != nil {
			return Grant{}, err
		}
	}
}

// errPollAgain marks an attempt that certainly took nothing and is worth repeating
// (the server was unreachable, or the grant was undone).
var errPollAgain = errors.New("not acquired")

// try makes one attempt. It returns ok with the grant, or a classified error
// (Fail, Info, or one that wraps errPollAgain), or neither when the key is taken.
func (r *redisLock) try(ctx context.Context) (Grant, bool, error) {
	id, gen := r.node.current()
	value, err := r.newValue(id)
	if err != nil {
		return Grant{}, false, Fail(err)
	}
	start := time.Now()
	client, err := r.setClient(ctx)
	if err != nil {
		return Grant{}, false, fmt.Errorf("%w: %w", errPollAgain, err)
	}
	token, err := r.setNX(ctx, client, value)
	switch {
	case errors.Is(err, redis.Nil):
		return Grant{}, false, nil
	case client != r.node.client && redisMoved(err):
		// redis-lock-wait on a cluster sent to the primary its slot map named, which
		// no longer serves the slot: nothing was set; ask the cluster again.
		r.node.client.(*redis.ClusterClient).ReloadState(ctx)
		return Grant{}, false, fmt.Errorf("%w: %w", errPollAgain, err)
	case redisReply(err):
		return Grant{}, false, Fail(fmt.Errorf("acquire: %w", err))
	case err != nil && redisDefinite(err):
		return Grant{}, false, fmt.Errorf("%w: %w", errPollAgain, err)
	case err != nil:
		return Grant{}, false, Info(r.undo(value, fmt.Errorf("acquire: %w", err)))
	}
	if r.mutant == redisSetNXThenExpire {
		if err := r.pexpire(ctx); err != nil {
			return Grant{}, false, Info(fmt.Errorf("acquire: the key is set, but PEXPIRE failed: %w", err))
		}
	}
	if r.mutant == redisWait {
		if g, ok, err := r.waitReplica(ctx, client.(*redis.Client), value); !ok {
			return g, false, err
		}
	}
	until := start.Add(r.cfg.SessionTimeout - redisDrift(r.cfg.SessionTimeout))
	if _, now := r.node.current(); now != gen {
		return r.retract(value, "the connection changed under the acquire, so the value names a closed one")
	}
	if r.mutant != redisNoExpiry && !time.Now().Before(until) {
		return r.retract(value, "the reply came after the lock's validity ran out")
	}
	r.value, r.token = value, token
	r.startExtender(value, r.lease.grant(until, r.mutant != redisNoExpiry && r.mutant != redisIgnoreValidity))
	place := workloads.LockPlace{Session: FormatSessionID(id), Keys: []string{r.cfg.Path}, Value: value}
	return Grant{Token: json.RawMessage(strconv.FormatInt(token, 10)), Lock: &place}, true, nil
}

// setClient is the client an attempt's SET goes through: the node's, or for
// redis-lock-wait the client of its primary, since WAIT counts the replicas that
// have the writes of the connection it arrives on, so the SET and the WAIT must
// share one (each client has one connection, redisopt). On a Redis Cluster that is
// the client of the primary the slot map names now: a MOVED reply then fails the
// attempt rather than following the redirect to another primary's connection,
// and the gen check in try retracts a grant whose slot map changed under it.
func (r *redisLock) setClient(ctx context.Context) (redis.Scripter, error) {
	switch {
	case r.mutant != redisWait:
		return r.node.client, nil
	case r.primary != nil:
		return r.primary, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.io)
	defer cancel()
	primary, err := r.node.client.(*redis.ClusterClient).MasterForKey(ctx, r.cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("finding the primary of %s's slot: %w", r.cfg.Path, err)
	}
	return primary, nil
}

// waitReplica waits (WAIT 1 through primary, the connection the SET went through,
// up to the request timeout) until a replica has the key just set with value; ok
// when one does. Otherwise the grant is given back (retract) and the acquire polls
// again; a WAIT whose outcome is unknown is info.
func (r *redisLock) waitReplica(ctx context.Context, primary *redis.Client, value string) (Grant, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, 2*r.io)
	defer cancel()
	n, err := primary.Wait(wctx, 1, r.io).Result()
	switch {
	case err != nil && redisReply(err):
		return r.retract(value, fmt.Sprintf("WAIT 1 was refused (%v)", err))
	case err != nil:
		return Grant{}, false, Info(r.undo(value, fmt.Errorf("acquire: the key is set, but WAIT 1 failed: %w", err)))
	case n < 1:
		return r.retract(value, fmt.Sprintf("no replica acknowledged the key within %s (WAIT 1)", r.io))
	}
	return Grant{}, true, nil
}

// newValue returns a fresh lock value for the connection with CLIENT ID id.
func (r *redisLock) newValue(id int64) (string, error) {
	if r.mutant == redisStaticValue {
		return lockValue(id, staticToken), nil
	}
	token, err := randomToken()
	return lockValue(id, token), err
}

// setNX runs the variant's acquire script and returns the fencing token, or
// redis.Nil when the key is taken.
func (r *redisLock) setNX(ctx context.Context, client redis.Scripter, value string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.io)
	defer cancel()
	script := redisAcquireScript
	if r.mutant == redisNoExpiry || r.mutant == redisSetNXThenExpire {
		script = redisAcquireNoTTLScript
	}
	return script.Run(ctx, client, r.keys, value, r.cfg.SessionTimeout.Milliseconds()).Int64()
}

// pexpire is mutant-redis-setnx-then-expire's second command.
func (r *redisLock) pexpire(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.io)
	defer cancel()
	return r.node.client.PExpire(ctx, r.cfg.Path, r.cfg.SessionTimeout).Err()
}

// retract undoes a grant that cannot be used and asks for another poll; if the undo's
// outcome is unknown, the acquire is info.
func (r *redisLock) retract(value, why string) (Grant, bool, error) {
	if err := r.compareAndDelete(value); err != nil {
		return Grant{}, false, Info(fmt.Errorf("acquired, but %s, and releasing it failed: %w", why, err))
	}
	return Grant{}, false, fmt.Errorf("%w: acquired, but %s: released", errPollAgain, why)
}

// undo deletes value's key after an acquire whose outcome is unknown, so that a set
// that did happen does not block everyone until the TTL; it returns cause, noting
// what the cleanup did.
func (r *redisLock) undo(value string, cause error) error {
	if err := r.compareAndDelete(value); err != nil {
		return fmt.Errorf("%w (cleanup failed too: %v)", cause, err)
	}
	return fmt.Errorf("%w (the key, if set, was deleted)", cause)
}

// compareAndDelete deletes the key if it holds value, in a request of its own.
func (r *redisLock) compareAndDelete(value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.io)
	defer cancel()
	return redisReleaseScript.Run(ctx, r.node.client, r.keys[:1], value).Err()
}

// startExtender keeps the hold of value (lease generation gen) alive; a key set with
// no TTL (mutant-redis-no-expiry) has nothing to extend.
func (r *redisLock) startExtender(value string, gen uint64) {
	if r.mutant == redisNoExpiry {
		return
	}
	script := redisExtendScript
	switch r.mutant {
	case redisExtendRecreates:
		script = redisExtendRecreateScript
	case redisBlindExtend:
		script = redisBlindExtendScript
	}
	r.ext = startExtender(extendSpec{client: r.node.client, script: script, key: r.cfg.Path, value: value,
		ttl: r.cfg.SessionTimeout, io: r.io, lease: &r.lease, gen: gen, report: r.mutant != redisIgnoreValidity, log: r.log})
}

// Release implements Recipe.
func (r *redisLock) Release(ctx context.Context) error {
	r.ext.halt()
	value := r.value
	r.value, r.ext, r.token = "", nil, 0
	held := r.lease.end()
	if value == "" {
		return Fail(errors.New("not held"))
	}
	n, err := r.del(ctx, value)
	switch {
	case !held:
		if err != nil {
			r.log.Printf("release after lost: %v", err)
		}
		return Fail(errValidityRanOut)
	case err != nil:
		return Info(fmt.Errorf("release: %w", err))
	case n == 0:
		return Fail(errors.New("not held: the key no longer holds this worker's value"))
	}
	return nil
}

// del runs the variant's release and returns how many keys it deleted.
func (r *redisLock) del(ctx context.Context, value string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.io)
	defer cancel()
	switch r.mutant {
	case redisBlindDel:
		return r.node.client.Del(ctx, r.cfg.Path).Result()
	case redisStaticValue:
		return redisReleaseSuffixScript.Run(ctx, r.node.client, r.keys[:1], ":"+staticToken).Int64()
	}
	return redisReleaseScript.Run(ctx, r.node.client, r.keys[:1], value).Int64()
}

// Close implements Recipe: it releases a lock still held (best effort: a worker that
// dies cannot) and closes the connection.
func (r *redisLock) Close() error {
	r.ext.halt()
	r.ext = nil
	if r.value != "" && r.lease.end() {
		if _, err := r.del(context.Background(), r.value); err != nil {
			r.log.Printf("close: releasing: %v", err)
		}
	}
	r.value = ""
	return r.node.client.Close()
}
