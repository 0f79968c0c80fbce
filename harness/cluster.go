package harness

import (
	"context"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// cluster is the run as the nemesis sees it: servers, live workers, the holder.
type cluster struct {
	svc lockservice.Service
	// sessionLock: the run's recipe locks in the holder's server session
	// (RecipeSessionLock), so ending a session, or a server, frees its locks.
	sessionLock bool
	// declaredSessionLocks: a worker said its lock goes with its connection (an
	// acquire's workloads.LockPlace.SessionBound), whatever the catalogue knows of it.
	declaredSessionLocks atomic.Bool

	mu      sync.Mutex
	workers map[int]*worker // by slot: the slot's current process
}

var (
	_ nemesis.ServiceHolder = (*cluster)(nil)
	_ nemesis.SessionLocks  = (*cluster)(nil)
)

// Service is the run's lock service: the nemesis asks it for the abilities its
// faults need (nemesis.SessionKiller, StandbyPromoter, SessionKeeper, RedisAdmin),
// which the services implement themselves.
func (c *cluster) Service() any { return c.svc }

// KillFreesLocks reports whether ending a session frees its locks: the run's recipe
// locks in the holder's server session (a database's advisory lock, GET_LOCK), by its
// catalogue entry or as its workers said; not a lock table's row, nor a Redis key
// (which lives until its TTL).
func (c *cluster) KillFreesLocks() bool { return c.sessionLock || c.declaredSessionLocks.Load() }

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
	return c.svc.ServerOf(ctx, cl.Addr, cl.LockSessionID())
}

func (c *cluster) client(w *worker) nemesis.Client {
	id, passwd := w.Session()
	cl := nemesis.Client{Process: w.Process(), Slot: w.slot, Netns: w.host.Netns, Addr: w.host.Addr,
		Pid: w.Pid(), SessionID: id, Passwd: passwd}
	if p := w.place.Load(); p != nil {
		cl.LockSession = p.Session
	}
	return cl
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
