package recipes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Recipe is one worker's handle on one lock. Serve calls its methods one at a time.
//
// Errors are classified with Classify: a recipe wraps an error with Fail only when
// the operation certainly did not take effect; any other error is reported as info.
type Recipe interface {
	// Acquire waits until the lock is held, req.Timeout passes or ctx ends. A timeout
	// is Fail(ErrTimeout), returned only once the lock is certainly not held.
	Acquire(ctx context.Context, req AcquireRequest) (Grant, error)
	// Release gives up the lock. Fail means it was not held (any more).
	Release(ctx context.Context) error
	// Close ends the recipe's session; what it held is released by ZooKeeper.
	Close() error
}

// AcquireRequest is what an acquire asks for.
type AcquireRequest struct {
	// Timeout bounds the wait; zero means wait until ctx ends.
	Timeout time.Duration
	// Mode is the read-write lock mode ("read" or "write"); empty for other kinds.
	Mode string
}

// Grant is what a successful acquire returns.
type Grant struct {
	// Token is an optional fencing token, a JSON value; nil when the recipe has none.
	Token json.RawMessage
}

// Events receives what a recipe learns outside any request. Its methods never block,
// so a recipe may call them from a ZooKeeper client's callback.
type Events interface {
	// Lost reports that what was acquired is no longer held.
	Lost(reason string)
	// Session reports a new ZooKeeper session; passwd may be nil.
	Session(id int64, passwd []byte)
}

// Config is what a recipe is built from: the init request's fields, decoded.
type Config struct {
	// Servers are the ZooKeeper client addresses, host:port.
	Servers []string
	// SessionTimeout is the session timeout the recipe asks for.
	SessionTimeout time.Duration
	// Path is the lock's znode path, used by this lock only.
	Path string
	// Kind is the lock kind, e.g. "mutex".
	Kind string
	// Permits is the semaphore size; 0 or 1 for a mutex.
	Permits int
	// Worker is the worker's number, for logs.
	Worker int
	// Log receives the recipe's and its client library's log lines; nil discards.
	Log io.Writer
	// Events receives lost and session events; never nil when built by Serve.
	Events Events
}

// Constructor builds a recipe. It returns once the recipe is ready for Acquire; its
// errors are classified like an operation's (e.g. Fail for an unsupported kind).
type Constructor func(ctx context.Context, cfg Config) (Recipe, error)

// Lock kinds known to the recipes.
const (
	KindMutex = "mutex"
)

// Lookup returns the constructor of the named built-in recipe.
func Lookup(name string) (Constructor, error) {
	c, ok := builtins()[name]
	if !ok {
		return nil, fmt.Errorf("unknown recipe %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c, nil
}

// Names lists the built-in recipes, sorted.
func Names() []string {
	var names []string
	for n := range builtins() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func builtins() map[string]Constructor {
	return map[string]Constructor{
		"gozk": NewGoZK,
	}
}
