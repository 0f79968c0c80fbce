package zlcmutex

import (
	"errors"
	"fmt"
)

// Client is the part of a ZooKeeper client that the lock uses, and all of it. It is
// declared here, by its consumer, so that it stays small: ZKClient implements it over
// go-zookeeper, and an in-memory deterministic ZooKeeper simulator can implement it
// for property tests. No method takes a context: a call returns when the server
// answered or the client gave up on the connection.
//
// Errors are this package's sentinels (ErrNoNode, ErrConnectionLoss, ...), possibly
// wrapped, never a client library's own values. Paths are absolute znode paths.
type Client interface {
	// Create creates a node and returns its path, which for a sequential node ends
	// with the ten-digit sequence number the server appended.
	Create(path string, data []byte, flags CreateFlags) (string, error)
	// Delete deletes a node if its version matches (-1 matches any).
	Delete(path string, version int32) error
	// Get returns a node's data and stat.
	Get(path string) ([]byte, Stat, error)
	// GetW is Get that also leaves a one-shot watch on the node, which fires once
	// when the node changes or is deleted, or when the watch is dropped (the session
	// ended). It sets no watch when the node does not exist (ErrNoNode).
	GetW(path string) ([]byte, Stat, <-chan Event, error)
	// Children returns the names (not paths) of a node's children, in no order.
	Children(path string) ([]string, error)
	// Set replaces a node's data if its version matches (-1 matches any).
	Set(path string, data []byte, version int32) (Stat, error)
	// Multi applies ops atomically: all or none. When op i fails and none is applied
	// it returns a *MultiError with Index i.
	Multi(ops ...Op) error
	// Sync makes the server the client talks to catch up with the leader, so that
	// reads that follow see every write committed before the sync.
	Sync(path string) error
	// Session returns what the client knows of its session now and a channel that
	// is closed at the next change of it. A client whose session expired may go on
	// with a new session (a new ID).
	Session() (Session, <-chan struct{})
}

// ChildWatcher is what MutantHerd needs of its Client besides Client: Children that
// also leaves a one-shot watch on the node's children, which fires once when a child
// is added or removed, or when the watch is dropped (the session ended). The correct
// recipe never watches the children, so Client does not have it.
type ChildWatcher interface {
	ChildrenW(path string) ([]string, <-chan Event, error)
}

// CreateFlags select the kind of node Create makes; zero is a persistent node.
type CreateFlags int

// Create flags, combinable.
const (
	// FlagEphemeral: the node is deleted when the creating session ends.
	FlagEphemeral CreateFlags = 1 << iota
	// FlagSequential: the server appends a ten-digit sequence number to the name.
	FlagSequential
)

// Stat is the part of a node's metadata the lock uses.
type Stat struct {
	// Czxid is the zxid of the transaction that created the node.
	Czxid int64
	// Mzxid is the zxid of the transaction that last modified the node.
	Mzxid int64
	// Version is the number of changes to the node's data.
	Version int32
	// EphemeralOwner is the session that owns an ephemeral node; 0 otherwise.
	EphemeralOwner int64
}

// EventType says what a watch saw.
type EventType int

// Watch event types.
const (
	// EventNodeCreated: the watched node was created.
	EventNodeCreated EventType = iota + 1
	// EventNodeDeleted: the watched node was deleted.
	EventNodeDeleted
	// EventNodeDataChanged: the watched node's data changed.
	EventNodeDataChanged
	// EventNodeChildrenChanged: the watched node's children changed.
	EventNodeChildrenChanged
	// EventNotWatching: the watch was dropped (its session ended); nothing is known
	// about the node.
	EventNotWatching
)

// String names the event type.
func (t EventType) String() string {
	switch t {
	case EventNodeCreated:
		return "created"
	case EventNodeDeleted:
		return "deleted"
	case EventNodeDataChanged:
		return "data changed"
	case EventNodeChildrenChanged:
		return "children changed"
	case EventNotWatching:
		return "not watching"
	}
	return fmt.Sprintf("event(%d)", int(t))
}

// Event is a watch firing.
type Event struct {
	Type EventType
	// Path is the watched node's path.
	Path string
}

// State is the state of a client's session.
type State int

// Session states.
const (
	// StateDisconnected: no connection; the session may still be alive on the servers
	// (its ephemeral nodes exist) or may be expiring.
	StateDisconnected State = iota
	// StateConnected: connected, with a live session.
	StateConnected
	// StateExpired: the session ended on the servers; its ephemeral nodes are gone.
	// The client may establish a new session afterwards (StateConnected, a new ID).
	StateExpired
	// StateClosed: the client was closed; it is final.
	StateClosed
)

// String names the state.
func (s State) String() string {
	switch s {
	case StateDisconnected:
		return "disconnected"
	case StateConnected:
		return "connected"
	case StateExpired:
		return "expired"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Session is what a client knows of its session.
type Session struct {
	// ID is the id of the current session, or of the last one when the state is not
	// StateConnected; 0 before the first session.
	ID int64
	// State is the session's state as the client knows it.
	State State
}

// OpKind is the kind of a Multi operation.
type OpKind int

// Multi operation kinds.
const (
	// OpCheck succeeds when the node exists with the version (-1: any).
	OpCheck OpKind = iota + 1
	// OpSet sets the node's data when the version matches (-1: any).
	OpSet
)

// Op is one operation of a Multi.
type Op struct {
	Kind OpKind
	Path string
	// Data is what OpSet stores.
	Data []byte
	// Version is the node version required; -1 matches any.
	Version int32
}

// CheckOp is a Multi operation that requires path to exist at version (-1: any).
func CheckOp(path string, version int32) Op {
	return Op{Kind: OpCheck, Path: path, Version: version}
}

// SetOp is a Multi operation that sets path's data if its version matches (-1: any).
func SetOp(path string, data []byte, version int32) Op {
	return Op{Kind: OpSet, Path: path, Data: data, Version: version}
}

// MultiError says which operation of a Multi failed; none was applied.
type MultiError struct {
	// Index is the position of the failed op in the Multi's arguments.
	Index int
	// Err is why it failed, e.g. ErrNoNode.
	Err error
}

// Error describes the failed op.
func (e *MultiError) Error() string { return fmt.Sprintf("multi op %d: %v", e.Index, e.Err) }

// Unwrap returns why the op failed.
func (e *MultiError) Unwrap() error { return e.Err }

// Errors a Client returns. The first four are definite: the request was not applied.
// ErrConnectionLoss, ErrSessionExpired, ErrClosed and ErrUnknown leave the outcome of a
// write unknown.
var (
	// ErrNoNode: the node (or, for Create, its parent) does not exist.
	ErrNoNode = errors.New("zk: node does not exist")
	// ErrNodeExists: Create found the node already there.
	ErrNodeExists = errors.New("zk: node already exists")
	// ErrBadVersion: the version did not match.
	ErrBadVersion = errors.New("zk: version conflict")
	// ErrNotEmpty: Delete of a node that has children.
	ErrNotEmpty = errors.New("zk: node has children")
	// ErrConnectionLoss: the connection failed before the answer came; the request
	// may or may not have been applied.
	ErrConnectionLoss = errors.New("zk: connection loss")
	// ErrSessionExpired: the session ended. The request may have been applied before
	// it ended, but no ephemeral node it created survives.
	ErrSessionExpired = errors.New("zk: session expired")
	// ErrClosed: the client was closed; the request may or may not have been applied.
	ErrClosed = errors.New("zk: client closed")
	// ErrUnknown wraps any other client error; the outcome is unknown.
	ErrUnknown = errors.New("zk: unexpected error")
)

// definiteClientError reports whether err says the request was certainly not applied.
func definiteClientError(err error) bool {
	return errors.Is(err, ErrNoNode) || errors.Is(err, ErrNodeExists) ||
		errors.Is(err, ErrBadVersion) || errors.Is(err, ErrNotEmpty)
}
