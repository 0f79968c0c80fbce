package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/go-zookeeper/zk"
	"io"
	"net"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
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
	// Close ends the recipe's session; what it held is released by ZooKeeper (a
	// Redis recipe deletes its key, best effort).
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
	// Lock optionally says where the lock lives and which connection holds it
	// (workloads.LockPlace): the acquire's ok carries it to the harness.
	Lock *workloads.LockPlace
}

// Events receives what a recipe learns outside any request. Its methods never block,
// so a recipe may call them from a ZooKeeper client's callback.
type Events interface {
	// Lost reports that what was acquired is no longer held.
	Lost(reason string)
	// Session reports a new ZooKeeper session; passwd may be nil. A Redis recipe
	// reports the CLIENT ID of each new connection it locks through (RedLock: to the
	// first instance), with a nil passwd.
	Session(id int64, passwd []byte)
	// Renewed reports that the server renewed the lease on what is held, having
	// checked it was still this holder's (a lease recipe's extend or heartbeat).
	Renewed()
}

// Config is what a recipe is built from: the init request's fields, decoded.
type Config struct {
	// Servers are the ZooKeeper client addresses, host:port. For a Redis recipe they
	// are Redis instances: a single-instance recipe uses the first, RedLock every
	// one as an independent primary; with SentinelMaster, they are Redis Sentinels.
	Servers []string
	// SentinelMaster, when set, is the name the sentinels in Servers know the
	// primary by: a recipe whose entry has Sentinel finds the primary through them;
	// the others refuse (init's sentinel_master).
	SentinelMaster string
	// RedisCluster says Servers are the instances of a Redis Cluster: a recipe whose
	// entry has Cluster sends each key to the primary that serves its slot; the
	// others refuse (init's redis_cluster).
	RedisCluster bool
	// SessionTimeout is the session timeout the recipe asks for; a Redis recipe's
	// lock TTL.
	SessionTimeout time.Duration
	// Path is the lock's znode path, used by this lock only; a Redis recipe's key,
	// verbatim.
	Path string
	// Kind is the workload, e.g. mutex; a recipe refuses kinds it does not speak
	// (its catalogue entry's Kinds).
	Kind workloads.Kind
	// Permits is the semaphore size; 0 or 1 for a mutex.
	Permits int
	// Worker is the worker's number, for logs.
	Worker int
	// CounterPath is the counter znode of the counter workload; empty otherwise.
	CounterPath string
	// Fenced asks that counter writes take effect only while the recipe's lock node
	// still exists (a multi of check + setData). A recipe that cannot name its lock
	// node must fail its constructor with Fail("<recipe> cannot fence: ...").
	Fenced bool
	// Log receives the recipe's and its client library's log lines; nil discards.
	Log io.Writer
	// Events receives lost and session events; never nil when built by Serve.
	Events Events
	// ZKOptions are more go-zookeeper connect options, applied after the recipe's own
	// (the wire simulator's transport: zksim.HarnessRecipe). Recipes on other
	// clients ignore them.
	ZKOptions []func(*zk.Conn)
	// RedisDialer, when set, is the dialer of every go-redis client a Redis recipe
	// on independent instances makes (go-redis's Options.Dialer: redsim's simulated
	// instances); nil dials TCP.
	RedisDialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Counter is implemented by a recipe that supports the counter workload: a mutex
// whose holder reads the counter znode and writes it back while holding. Serve
// answers read and write requests with it, and fails them for a recipe without it.
type Counter interface {
	// Read returns the counter: Config.CounterPath's data as a decimal integer, 0 when
	// the node is missing or empty.
	Read(ctx context.Context) (int64, error)
	// Write stores v in the counter: a plain set, or with Config.Fenced a multi that
	// also checks the lock node still exists, failing with ErrFenced when it is gone.
	Write(ctx context.Context, v int64) error
}

// ErrFenced is the cause of a fenced counter write that found the recipe's lock node
// gone and wrote nothing; recipes return it wrapped with Fail.
var ErrFenced = errors.New("fenced: lock node gone")

// ErrNoCounter is the cause of a read or write sent to a recipe that does not
// implement Counter.
var ErrNoCounter = errors.New("recipe does not support the counter workload")

// Constructor builds a recipe. It returns once the recipe is ready for Acquire; its
// errors are classified like an operation's (e.g. Fail for an unsupported kind).
type Constructor func(ctx context.Context, cfg Config) (Recipe, error)
