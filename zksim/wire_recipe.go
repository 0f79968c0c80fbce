package zksim

import (
	"context"
	"errors"
	"net"
	"regexp"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// ConnEnv is what a wire recipe (Recipe.NewConn) gets to build one client's Locker:
// the recipe opens its own zk.Conn, as in production, with one extra option.
//
//	conn, _, err := zk.Connect(env.Servers, 10*time.Second, env.Option())
type ConnEnv struct {
	// Servers is the connect string to pass to zk.Connect.
	Servers []string
	// Path is the lock's znode; it does not exist at first.
	Path string
	// OnLost must be called (it never blocks) when the lock is lost while held.
	// Option's event callback calls it when go-zookeeper reports the session
	// expired; a recipe with a better signal may call it too.
	OnLost func(reason string)
	// Logf receives the recipe's diagnostics; they go to the run's trace.
	Logf func(format string, args ...any)
	// NewGUID returns a fresh unique string, the same in every replay of a run, for
	// a recipe that names its nodes itself.
	NewGUID func() string

	transport func(*zk.Conn)
	client    *Client
}

// Dialer is the simulator's dialer, for a ZooKeeper client that is not
// go-zookeeper but takes the same kind of dialer (its forks: samuel/go-zookeeper,
// dubbogo/go-zookeeper): pass it to the fork's WithDialer, with HostProvider to its
// WithHostProvider.
func (e ConnEnv) Dialer() func(network, address string, timeout time.Duration) (net.Conn, error) {
	return e.client.wire.dial
}

// HostProvider is the simulator's host provider (Init, Len, Next, Connected), which
// lets the client connect only when the scheduler says; see Dialer.
func (e ConnEnv) HostProvider() zk.HostProvider { return hostProvider{e.client.wire} }

// Transport returns the option that connects a zk.Conn through the simulator and
// nothing else: its dialer, its host provider, and a logger that discards
// go-zookeeper's own lines. Option is Transport with the event callback that reports
// a lost session; a recipe that sets its own event callback takes Transport and calls
// OnLost itself.
func (e ConnEnv) Transport() func(*zk.Conn) { return e.transport }

// Option returns the option that connects a zk.Conn through the simulator: its
// dialer, its host provider (the scheduler decides when the client reconnects), a
// logger that discards go-zookeeper's own lines, and an event callback that calls
// OnLost when the session expires. Pass it last to zk.Connect; a recipe's own
// WithEventCallback would replace the callback. Open one zk.Conn per Locker.
func (e ConnEnv) Option() func(*zk.Conn) {
	return func(c *zk.Conn) {
		e.transport(c)
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateExpired && e.OnLost != nil {
				e.OnLost("session expired")
			}
		})(c)
	}
}

// LockUnlock adapts a go-zookeeper recipe's lock and unlock functions (zk.Lock's
// Lock and Unlock, say) on conn to a Locker. Acquire runs lock in a goroutine; when
// the scheduler times the acquire out, it closes conn (ending the session, and with
// it any node the lock made), waits for lock to return, and returns
// ErrAbandoned, an unknown outcome, as the real harness does with go-zookeeper's
// lock. Close closes conn.
func LockUnlock(conn *zk.Conn, lock, unlock func() error) Locker {
	return lockUnlock(conn.Close, lock, unlock)
}

// lockUnlock is LockUnlock over any client: closeConn closes its connection.
func lockUnlock(closeConn func(), lock, unlock func() error) Locker {
	f := &funcLocker{closeFn: closeConn, lock: lock, unlock: unlock, first: make(chan struct{}, 1), closed: make(chan struct{})}
	f.first <- struct{}{}
	return f
}

// ErrAbandoned is what a LockUnlock Locker's Acquire returns when it was timed out:
// its connection was closed under a lock call that could not be interrupted.
var ErrAbandoned = errors.New("zksim: acquire timed out; its connection was closed")

// funcLocker is LockUnlock's Locker.
type funcLocker struct {
	closeFn      func()
	lock, unlock func() error
	// first holds one token, for the first caller of closeConn; closed is closed
	// once conn.Close returned. zk.Conn.Close holds a sync.Once's mutex for up to
	// a second, and a goroutine waiting on a mutex would keep the bubble from
	// settling: a second caller waits on closed instead.
	first, closed chan struct{}
}

// closeConn closes conn once; a second caller waits until the first is done.
func (f *funcLocker) closeConn() {
	select {
	case <-f.first:
		f.closeFn()
		close(f.closed)
	case <-f.closed:
	}
}

var _ Locker = (*funcLocker)(nil)

func (f *funcLocker) Acquire(ctx context.Context) (Hold, error) {
	done := make(chan error, 1)
	go func() { done <- f.lock() }()
	select {
	case err := <-done:
		return Hold{}, opError("lock", err)
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return Hold{}, opError("lock", err)
	default:
	}
	f.closeConn()
	<-done
	return Hold{}, ErrAbandoned
}

func (f *funcLocker) Release() error { return opError("unlock", f.unlock()) }

// OpError is an error a LockUnlock Locker's lock or unlock function returned, so
// that a Recipe's Definite can tell them apart.
type OpError struct {
	// Op is "lock" or "unlock".
	Op  string
	Err error
}

func (e *OpError) Error() string { return e.Op + ": " + e.Err.Error() }

// Unwrap returns the recipe's error.
func (e *OpError) Unwrap() error { return e.Err }

func opError(op string, err error) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, Err: err}
}

func (f *funcLocker) Close() { f.closeConn() }

// guidRE matches the GUIDs go-zookeeper puts in protected node names (from
// crypto/rand, so different in every run).
var guidRE = regexp.MustCompile(`_c_[0-9a-f]{32}-`)

// maskGUIDs replaces protected names' GUIDs, so that two runs' traces compare.
func maskGUIDs(s string) string { return guidRE.ReplaceAllString(s, "_c_<guid>-") }

// ZLCMutexWire is zlc-mutex (or a mutant) as a wire recipe: the same code as
// ZLCMutex, on zlcmutex.ZKClient over a go-zookeeper zk.Conn that talks to the
// simulator, so that the in-process and the wire simulations can be compared on it.
func ZLCMutexWire(m zlcmutex.Mutant) Recipe {
	return Recipe{
		Name: m.String() + " over the wire",
		NewConn: func(env ConnEnv) (Locker, error) {
			c, err := zlcmutex.DialZK(zlcmutex.ZKConfig{
				Servers:        env.Servers,
				SessionTimeout: 10 * time.Second,
				Options:        []func(*zk.Conn){env.Transport()},
			})
			if err != nil {
				return nil, err
			}
			l, err := zlcmutex.New(zlcmutex.Config{
				Client: c, Path: env.Path, Mutant: m, OnLost: env.OnLost, Logf: env.Logf, NewGUID: env.NewGUID,
			})
			if err != nil {
				c.Close()
				return nil, err
			}
			return zlcWireLocker{zlcLocker{l}, c}, nil
		},
		Definite: zlcmutex.Definite,
	}
}

// zlcWireLocker is zlc-mutex's Locker that also closes its client.
type zlcWireLocker struct {
	zlcLocker
	c *zlcmutex.ZKClient
}

func (z zlcWireLocker) Close() {
	z.zlcLocker.Close()
	z.c.Close()
}

// HarnessRecipe is one of the harness's recipes on go-zookeeper (gozk, say: its
// catalogue constructor) as a wire recipe, unchanged: the constructor gets the
// simulator's transport in Config.ZKOptions, its session timeout, the lock path, and
// its lost events go to OnLost; its fail outcomes are definite, as the harness
// records them.
func HarnessRecipe(name string, build recipes.Constructor, sessionTimeout time.Duration) Recipe {
	return Recipe{
		Name: name,
		NewConn: func(env ConnEnv) (Locker, error) {
			r, err := build(context.Background(), recipes.Config{
				Servers:        env.Servers,
				SessionTimeout: sessionTimeout,
				Path:           env.Path,
				Kind:           workloads.Mutex,
				Log:            simsched.LogWriter{Logf: env.Logf},
				Events:         simsched.LostEvents{OnLost: env.OnLost},
				ZKOptions:      []func(*zk.Conn){env.Transport()},
			})
			if err != nil {
				return nil, err
			}
			return simsched.HarnessLocker[Hold]{R: r}, nil
		},
		Definite: func(err error) bool {
			reply, _ := recipes.Classify(err)
			return reply == workloads.ReplyFail
		},
	}
}
