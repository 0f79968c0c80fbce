package redsim

import (
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker is one simulated client's handle on the lock under test: what the lock
// property drives. Its methods are called one at a time, from a goroutine of the
// run's bubble.
type Locker interface {
	// Acquire waits until the lock is held or ctx ends (the scheduler's timeout
	// step ends it).
	Acquire(ctx context.Context) (Hold, error)
	// Release gives the lock up; the property calls it after a reported loss too.
	Release() error
	// Close ends the handle, once, at the end of the run.
	Close()
}

// Hold is a successful acquire.
type Hold struct {
	// Until is the end of the validity the recipe declares (redsync's Until, say):
	// the holder believes it holds until then at most. Zero: until it releases or
	// reports the lock lost.
	Until time.Time
	// Token is the fencing token, 0 when none.
	Token int64
}

// Env is what a recipe gets to build one client's Locker: the instances'
// addresses and the dialer that reaches them, the key, and the TTL to lock with.
type Env struct {
	// Addrs are the instances' addresses, one per independent instance.
	Addrs []string
	// Key is the lock's key.
	Key string
	// TTL is the lock's time to live.
	TTL time.Duration
	// OnLost must be called (it never blocks) when the recipe learns it lost the
	// lock while it held it.
	OnLost func(reason string)
	// Logf receives the recipe's diagnostics; they go to the run's trace.
	Logf func(format string, args ...any)

	client *Client
}

// Dialer is the simulator's dialer for this client (go-redis's Options.Dialer).
func (e Env) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return e.client.Dialer()
}

// Options returns go-redis's defaults for instance i, dialled through the
// simulator: a client as most code makes it. A recipe with options of its own sets
// Addr and Dialer in them instead.
func (e Env) Options(i int) *redis.Options {
	return &redis.Options{Addr: e.Addrs[i], Dialer: e.Dialer()}
}

// Recipe is a lock recipe under test.
type Recipe struct {
	// Name names the recipe in traces.
	Name string
	// New builds one client's Locker. The requests it sends while it builds (a
	// connection's handshake, say) are served as they come, before the schedule.
	New func(env Env) (Locker, error)
}

// LockUnlock adapts a recipe's lock and unlock functions to a Locker. lock gets the
// acquire's context, and returns the validity it declares (zero for none); closeFn
// closes the recipe's clients.
func LockUnlock(closeFn func() error, lock func(ctx context.Context) (time.Time, error), unlock func() error) Locker {
	return funcLocker{closeFn, lock, unlock}
}

type funcLocker struct {
	closeFn func() error
	lock    func(context.Context) (time.Time, error)
	unlock  func() error
}

var _ Locker = funcLocker{}

func (f funcLocker) Acquire(ctx context.Context) (Hold, error) {
	until, err := f.lock(ctx)
	return Hold{Until: until}, err
}

func (f funcLocker) Release() error { return f.unlock() }

func (f funcLocker) Close() {
	if f.closeFn != nil {
		_ = f.closeFn()
	}
}
