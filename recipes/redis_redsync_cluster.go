package recipes

import (
	"context"
	"errors"
	"fmt"
	"time"

	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// NewRedsyncOneCluster builds redsync-one-cluster, RedLock misused on a Redis
// Cluster as Redisson's users are told to use RedissonRedLock there (one cluster
// client, getLock(name + "1"), getLock(name + "2"), ...: redisson issues #956 and
// #1728): redsync's Mutex over three pools that are all one go-redis cluster
// client, each renaming the mutex's key to one of locknames.ClusterRedLockKeys
// (renamedPool). RedLock's three "instances" are so three keys of one cluster,
// and two of them are on one primary (locknames.ClusterRedLockTags): a quorum that
// primary grants by itself, and loses whole when the cluster fails it over.
//
// Acquire, Release and lost are redsync's (NewRedsync), the grant naming the
// three keys; the session is the client's connection to the primary of the first
// key's slot, which the value names. It runs on a Redis Cluster only (init's
// redis_cluster; elsewhere run redsync) and cannot fence.
func NewRedsyncOneCluster(ctx context.Context, cfg Config) (Recipe, error) {
	const name = "redsync-one-cluster"
	switch {
	case cfg.Fenced:
		return nil, Fail(fmt.Errorf("%s cannot fence: RedLock has no fencing token", name))
	case !cfg.RedisCluster:
		return nil, Fail(fmt.Errorf("recipe %s is RedLock over keys of one Redis Cluster: init must name a cluster (redis_cluster; --redis-topology cluster); over independent instances run redsync", name))
	}
	if err := checkRedisConfig(name, cfg, 1, false); err != nil {
		return nil, err
	}
	logger := redisLogger(name, &cfg)
	keys := locknames.ClusterRedLockKeys(cfg.Path)
	home := cfg
	home.Path = keys[0] // the session: the connection to the first key's primary
	node := newClusterNode(home, fmt.Sprintf("zlc-worker-%d", cfg.Worker), func(id int64) { cfg.Events.Session(id, nil) })
	if err := node.connect(ctx, cfg.SessionTimeout); err != nil {
		closeRedisNodes([]*redisNode{node})
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	r := &redsyncLock{cfg: cfg, log: logger, io: redisIOTimeout(cfg.SessionTimeout), lease: lease{events: cfg.Events},
		nodes: []*redisNode{node}, keys: keys}
	shared := goredis.NewPool(node.client)
	pools := make([]redsyncredis.Pool, len(keys))
	for i, k := range keys {
		pools[i] = renamedPool{pool: shared, from: cfg.Path, to: k}
	}
	r.use(pools)
	return r, nil
}

// renamedPool is a redsync pool whose connections (renamedConn) send every
// command on the key from to the key to instead: redsync gives one name to a
// mutex on all its pools, and this is how one client's pools become instances
// with keys of their own.
type renamedPool struct {
	pool     redsyncredis.Pool
	from, to string
}

// Get implements redsync's redis.Pool.
func (p renamedPool) Get(ctx context.Context) (redsyncredis.Conn, error) {
	c, err := p.pool.Get(ctx)
	if err != nil {
		return nil, err
	}
	return renamedConn{conn: c, from: p.from, to: p.to}, nil
}

// renamedConn is a connection of renamedPool.
type renamedConn struct {
	conn     redsyncredis.Conn
	from, to string
}

// errOtherKey is the error of a command on a key the pool does not rename.
var errOtherKey = errors.New("not the key this pool renames")

// key is name renamed: to for from, an error for any other key.
func (c renamedConn) key(name string) (string, error) {
	if name != c.from {
		return "", fmt.Errorf("redsync pool renaming %s to %s: key %s: %w", c.from, c.to, name, errOtherKey)
	}
	return c.to, nil
}

// Get implements redsync's redis.Conn.
func (c renamedConn) Get(name string) (string, error) {
	k, err := c.key(name)
	if err != nil {
		return "", err
	}
	return c.conn.Get(k)
}

// Set implements redsync's redis.Conn.
func (c renamedConn) Set(name, value string) (bool, error) {
	k, err := c.key(name)
	if err != nil {
		return false, err
	}
	return c.conn.Set(k, value)
}

// SetNX implements redsync's redis.Conn.
func (c renamedConn) SetNX(name, value string, expiry time.Duration) (bool, error) {
	k, err := c.key(name)
	if err != nil {
		return false, err
	}
	return c.conn.SetNX(k, value, expiry)
}

// PTTL implements redsync's redis.Conn.
func (c renamedConn) PTTL(name string) (time.Duration, error) {
	k, err := c.key(name)
	if err != nil {
		return 0, err
	}
	return c.conn.PTTL(k)
}

// Eval implements redsync's redis.Conn: the script's keys (the first KeyCount of
// keysAndArgs) renamed.
func (c renamedConn) Eval(script *redsyncredis.Script, keysAndArgs ...any) (any, error) {
	if script.KeyCount < 0 || script.KeyCount > len(keysAndArgs) {
		return nil, fmt.Errorf("redsync pool renaming %s: a script of %d keys given %d arguments", c.from, script.KeyCount, len(keysAndArgs))
	}
	renamed := append([]any(nil), keysAndArgs...)
	for i := range script.KeyCount {
		name, ok := renamed[i].(string)
		if !ok {
			return nil, fmt.Errorf("redsync pool renaming %s: script key %d is a %T, not a string", c.from, i, renamed[i])
		}
		k, err := c.key(name)
		if err != nil {
			return nil, err
		}
		renamed[i] = k
	}
	return c.conn.Eval(script, renamed...)
}

// ScriptLoad implements redsync's redis.Conn.
func (c renamedConn) ScriptLoad(script *redsyncredis.Script) error { return c.conn.ScriptLoad(script) }

// Close implements redsync's redis.Conn.
func (c renamedConn) Close() error { return c.conn.Close() }
