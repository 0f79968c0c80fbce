package zksim

import (
	"context"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// Locker is one simulated client's handle on the lock under test: what the lock
// property drives. Its methods are called one at a time, from a goroutine of the
// simulation's bubble.
type Locker interface {
	// Acquire waits until the lock is held or ctx ends. The property ends ctx (with
	// context.DeadlineExceeded as its cause) when the scheduler times the acquire out.
	Acquire(ctx context.Context) (Hold, error)
	// Release gives the lock up. After a lost hold it must clean up what is left of
	// it (the property calls Release then too).
	Release() error
	// Close ends the handle; the property calls it once, after the client is closed.
	Close()
}

// Hold is a successful acquire.
type Hold struct {
	// Node is the lock node whose existence makes the client the holder; "" when the
	// recipe has none (the holder then counts as holding as long as it believes so).
	Node string
	// Token is the fencing token, 0 when none.
	Token int64
}

// LockEnv is what a recipe gets to build one client's Locker.
type LockEnv struct {
	// Client is the client's simulated ZooKeeper client.
	Client zlcmutex.Client
	// Path is the lock's znode; it does not exist at first.
	Path string
	// OnLost must be called (it never blocks) when the lock is lost while held.
	OnLost func(reason string)
	// NewGUID returns a fresh unique string, the same in every replay of a run.
	NewGUID func() string
	// Logf receives the recipe's diagnostics; they go to the run's trace.
	Logf func(format string, args ...any)
}

// Recipe is a lock recipe under test: one written against zlcmutex.Client (New),
// or one written against go-zookeeper's *zk.Conn, which talks ZooKeeper's wire
// protocol to the simulator (NewConn). Exactly one of New and NewConn is set.
type Recipe struct {
	// Name names the recipe in traces.
	Name string
	// New builds one client's Locker on a simulated in-process client.
	New func(env LockEnv) (Locker, error)
	// NewConn builds one client's Locker on a zk.Conn of its own, which it opens
	// with zk.Connect(env.Servers, timeout, env.Option()) (see ConnEnv).
	NewConn func(env ConnEnv) (Locker, error)
	// Definite reports whether an error of Acquire or Release means the operation
	// certainly had no effect (recorded as fail); any other error is an unknown
	// outcome (info), after which the client is retired and its session closed, as
	// the real harness does with a worker.
	Definite func(err error) bool
}

// ZLCMutex is zlc-mutex (zlcmutex.MutantNone) or one of its mutants, as a Recipe.
func ZLCMutex(m zlcmutex.Mutant) Recipe {
	return Recipe{
		Name: m.String(),
		New: func(env LockEnv) (Locker, error) {
			l, err := zlcmutex.New(zlcmutex.Config{
				Client:  env.Client,
				Path:    env.Path,
				Mutant:  m,
				OnLost:  env.OnLost,
				Logf:    env.Logf,
				NewGUID: env.NewGUID,
			})
			if err != nil {
				return nil, err
			}
			return zlcLocker{l}, nil
		},
		Definite: zlcmutex.Definite,
	}
}

// zlcLocker adapts a *zlcmutex.Lock to Locker.
type zlcLocker struct{ l *zlcmutex.Lock }

var _ Locker = zlcLocker{}

func (z zlcLocker) Acquire(ctx context.Context) (Hold, error) {
	g, err := z.l.Acquire(ctx)
	return Hold{Node: g.Node, Token: g.Token}, err
}

func (z zlcLocker) Release() error { return z.l.Release() }

func (z zlcLocker) Close() { z.l.Close() }
