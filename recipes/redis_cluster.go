package recipes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
)

// A lock on a Redis Cluster (init's redis_cluster): go-redis's cluster client,
// seeded with every instance of init's connect, sends each command to the primary
// that serves its key's slot, as its slot map says, and asks the cluster again
// after a MOVED or READONLY reply and every redisopt.ClusterStateReload. It has a
// connection to each instance it has spoken to (for its slot map too); the lock's
// session is its connection to the primary of the lock key's slot, whose CLIENT ID
// the lock's value names. A lock's companion key (redis-lock's fencing counter)
// shares the key's slot (besideKey): one script uses both.

// newClusterNode is the node of a lock on a Redis Cluster whose instances are
// cfg.Servers, on the primary that serves cfg.Path's slot (redisopt.Cluster's
// options, each connection named name and asked its CLIENT ID as it opens).
func newClusterNode(cfg Config, name string, session func(int64)) *redisNode {
	io := redisIOTimeout(cfg.SessionTimeout)
	c := &clusterConns{key: cfg.Path, wait: io, conns: map[string]clusterConn{}}
	o := redisopt.Cluster(cfg.Servers, io)
	o.ClientName = name
	o.NewClient = func(opt *redis.Options) *redis.Client {
		addr := opt.Addr
		opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return c.onConnect(ctx, addr, cn) }
		return redis.NewClient(opt)
	}
	c.client = redis.NewClusterClient(o)
	return &redisNode{addr: fmt.Sprintf("the primary of %s's slot in the cluster of %s", cfg.Path, strings.Join(cfg.Servers, ",")),
		client: c.client, session: session, cluster: c}
}

// clusterConn is one connection of a cluster client: its CLIENT ID on its
// instance, and its number among the client's connections (from 1).
type clusterConn struct {
	id  int64
	gen uint64
}

// clusterConns are a cluster client's connections, by instance address, and the
// lock key whose slot's primary carries the lock.
type clusterConns struct {
	client *redis.ClusterClient
	key    string
	// wait bounds a look-up of the slot's primary that must ask the cluster.
	wait time.Duration

	mu    sync.Mutex
	conns map[string]clusterConn
	count uint64
	// reported is the connection last reported as the session (its gen).
	reported uint64
}

// onConnect is the OnConnect hook of the client of the instance at addr: it asks
// the new connection its CLIENT ID.
func (c *clusterConns) onConnect(ctx context.Context, addr string, cn *redis.Conn) error {
	id, err := cn.ClientID(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLIENT ID: %w", err)
	}
	c.mu.Lock()
	c.count++
	c.conns[addr] = clusterConn{id: id, gen: c.count}
	c.mu.Unlock()
	return nil
}

// current is the connection to the primary that serves the key's slot in the
// client's slot map now: its CLIENT ID and number, 0 and 0 while the client has
// none (a command then opens one, and its number differs). A connection not
// reported yet is reported to session first.
func (c *clusterConns) current(session func(int64)) (int64, uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), c.wait)
	defer cancel()
	primary, err := c.client.MasterForKey(ctx, c.key)
	if err != nil {
		return 0, 0
	}
	c.mu.Lock()
	conn := c.conns[primary.Options().Addr]
	report := conn.gen != 0 && conn.gen != c.reported
	if report {
		c.reported = conn.gen
	}
	c.mu.Unlock()
	if report && session != nil {
		session(conn.id)
	}
	return conn.id, conn.gen
}

// connect asks the cluster for its slot map and pings the primary of the key's
// slot (describing it as what), which reports the session.
func (c *clusterConns) connect(ctx context.Context, what string, session func(int64)) error {
	primary, err := c.client.MasterForKey(ctx, c.key)
	if err == nil {
		err = primary.Ping(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", what, err)
	}
	c.current(session)
	return nil
}

// besideKey names a key a recipe keeps beside the lock's key (its fencing
// counter): key+suffix, or on a Redis Cluster a name in key's slot
// (redisopt.SameSlot), since one script uses both.
func besideKey(cfg Config, key, suffix string) (string, error) {
	if !cfg.RedisCluster {
		return key + suffix, nil
	}
	return redisopt.SameSlot(key, suffix)
}
