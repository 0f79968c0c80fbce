package harness

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// cluster is the run as the nemesis sees it: servers, live workers, the holder.
type cluster struct {
	svc lockservice.Service
	// sessionLock: the run's recipe locks in the holder's server session
	// (RecipeSessionLock), so ending a session, or a server, frees its locks.
	sessionLock bool

	mu      sync.Mutex
	workers map[int]*worker // by slot: the slot's current process
}

var _ nemesis.RedisCluster = (*cluster)(nil)

// redisAdmin is a service of Redis instances: what the Redis faults need of it.
type redisAdmin interface {
	Settings() redis.RedisSettings
	Command(ctx context.Context, id int, args ...string) (any, error)
}

// RedisSettings are the Redis instances' topology and persistence; ok is false when
// the run's service is not Redis.
func (c *cluster) RedisSettings() (topology, persistence string, ok bool) {
	r, ok := c.svc.(redisAdmin)
	if !ok {
		return "", "", false
	}
	s := r.Settings().WithDefaults()
	return string(s.Topology), string(s.Persistence), true
}

// RedisCommand sends one command to Redis instance id.
func (c *cluster) RedisCommand(ctx context.Context, id int, args ...string) (any, error) {
	r, ok := c.svc.(redisAdmin)
	if !ok {
		return nil, fmt.Errorf("redis command: the run's servers are not Redis")
	}
	return r.Command(ctx, id, args...)
}

var _ nemesis.DeathRecorder = (*cluster)(nil)

// Killing notes that a fault is about to kill worker cl: the hold it may have ends no
// later than now (session.crash), whenever the harness sees it exit.
func (c *cluster) Killing(cl nemesis.Client) {
	c.mu.Lock()
	w := c.workers[cl.Slot]
	c.mu.Unlock()
	if w != nil && int(w.process.Load()) == cl.Process {
		w.killedAt.CompareAndSwap(0, w.now())
	}
}

var (
	_ nemesis.SessionKiller   = (*cluster)(nil)
	_ nemesis.StandbyPromoter = (*cluster)(nil)
	_ nemesis.SessionKeeper   = (*cluster)(nil)

	_ sessionKeeper = (*sqldb.Postgres)(nil)
	_ sessionKeeper = (*sqldb.MariaDB)(nil)

	_ sessionKiller  = (*redis.Redis)(nil)
	_ sessionKiller  = (*sqldb.Postgres)(nil)
	_ sessionKiller  = (*sqldb.MariaDB)(nil)
	_ standbyService = (*sqldb.Postgres)(nil)
)

// sessionKiller is a service whose servers end a client's session when asked.
type sessionKiller interface {
	KillSession(ctx context.Context, server int, session string) (int, error)
}

// KillSession ends a worker's session from the server's side (connection-kill).
func (c *cluster) KillSession(ctx context.Context, server int, session string) (int, error) {
	k, ok := c.svc.(sessionKiller)
	if !ok {
		return 0, fmt.Errorf("kill session: the run's servers cannot end a client's session")
	}
	return k.KillSession(ctx, server, session)
}

// KillFreesLocks reports whether ending a session frees its locks: a database's
// session lock (an advisory lock, GET_LOCK); not a lock table's row, nor a Redis key
// (which lives until its TTL).
func (c *cluster) KillFreesLocks() bool {
	_, killer := c.svc.(sessionKiller)
	return killer && c.sessionLock
}

// sessionKeeper is a service whose servers keep a vanished client's session until
// their TCP keepalive gives up (the databases).
type sessionKeeper interface {
	VanishedClientKept() string
}

// VanishedClientKept names what bounds how long the servers keep a vanished client's
// session ("" when they keep none: ZooKeeper, Redis).
func (c *cluster) VanishedClientKept() string {
	if k, ok := c.svc.(sessionKeeper); ok {
		return k.VanishedClientKept()
	}
	return ""
}

// standbyService is a service with a streaming standby (PostgreSQL's).
type standbyService interface {
	HasStandby() bool
	PromoteStandby(ctx context.Context, id int) error
}

// HasStandby reports whether the run's service has a standby to promote.
func (c *cluster) HasStandby() bool {
	s, ok := c.svc.(standbyService)
	return ok && s.HasStandby()
}

// PromoteStandby promotes the standby once the primary crashed (failover).
func (c *cluster) PromoteStandby(ctx context.Context, id int) error {
	s, ok := c.svc.(standbyService)
	if !ok {
		return fmt.Errorf("promote: the run's servers have no standby")
	}
	return s.PromoteStandby(ctx, id)
}

func newCluster(svc lockservice.Service, sessionLock bool) *cluster {
	return &cluster{svc: svc, sessionLock: sessionLock, workers: map[int]*worker{}}
}

// setWorker records the slot's current worker process (nil when it has none).
func (c *cluster) setWorker(slot int, w *worker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w == nil {
		delete(c.workers, slot)
		return
	}
	c.workers[slot] = w
}

func (c *cluster) Servers() []nemesis.Server { return c.svc.Nodes() }

func (c *cluster) Leader(ctx context.Context) (int, bool) { return c.svc.Leader(ctx) }

func (c *cluster) ServerOf(ctx context.Context, cl nemesis.Client) (int, bool) {
	return c.svc.ServerOf(ctx, cl.Addr, cl.SessionID)
}

func (c *cluster) client(w *worker) nemesis.Client {
	id, passwd := w.Session()
	return nemesis.Client{Process: w.Process(), Slot: w.slot, Netns: w.host.Netns, Addr: w.host.Addr,
		Pid: w.Pid(), SessionID: id, Passwd: passwd}
}

func (c *cluster) Clients() []nemesis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]nemesis.Client, 0, len(c.workers))
	for _, w := range c.workers {
		out = append(out, c.client(w))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out
}

func (c *cluster) Holder() (nemesis.Client, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var holders []*worker
	for _, w := range c.workers {
		if w.State() == workloads.Holding {
			holders = append(holders, w)
		}
	}
	if len(holders) == 0 {
		return nemesis.Client{}, false
	}
	sort.Slice(holders, func(i, j int) bool { return holders[i].slot < holders[j].slot })
	return c.client(holders[0]), true
}

func (c *cluster) Waiter() (nemesis.Client, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var waiters []*worker
	releasing := false
	for _, w := range c.workers {
		switch w.State() {
		case workloads.Acquiring:
			waiters = append(waiters, w)
		case workloads.Releasing:
			releasing = true
		}
	}
	if !releasing || len(waiters) == 0 {
		return nemesis.Client{}, false
	}
	sort.Slice(waiters, func(i, j int) bool { return waiters[i].slot < waiters[j].slot })
	return c.client(waiters[0]), true
}

func (c *cluster) Idle() (nemesis.Client, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var idle []*worker
	for _, w := range c.workers {
		if w.State() == workloads.Thinking {
			idle = append(idle, w)
		}
	}
	if len(idle) == 0 {
		return nemesis.Client{}, false
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].slot < idle[j].slot })
	return c.client(idle[0]), true
}

func (c *cluster) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return c.svc.Dial(ctx, addr, timeout)
}
