package zlcmutex

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZKConfig says how DialZK connects.
type ZKConfig struct {
	// Servers are the ZooKeeper client addresses, host:port.
	Servers []string
	// SessionTimeout is the session timeout asked for.
	SessionTimeout time.Duration
	// Logger receives the client library's log lines; nil discards them.
	Logger interface {
		Printf(format string, args ...any)
	}
	// Options are more go-zookeeper connect options, applied after the adapter's
	// own (a simulator's dialer and host provider, say). One that sets an event
	// callback would take the adapter's session tracking away.
	Options []func(*zk.Conn)
}

// ZKClient is a Client over go-zookeeper's *zk.Conn: it maps go-zookeeper's errors to
// this package's sentinels and its session events to Session. Nodes are created with
// the open world ACL.
type ZKClient struct {
	conn *zk.Conn
	acl  []zk.ACL

	mu      sync.Mutex
	sess    Session
	changed chan struct{}
	// pending: the library announced a session before conn was known, so its id is
	// still to be read.
	pending bool
	closed  bool
}

var (
	_ Client       = (*ZKClient)(nil)
	_ ChildWatcher = (*ZKClient)(nil)
)

// DialZK starts a go-zookeeper connection. It returns at once; the session comes
// later (watch Session for StateConnected).
func DialZK(cfg ZKConfig) (*ZKClient, error) {
	if len(cfg.Servers) == 0 || cfg.SessionTimeout <= 0 {
		return nil, errors.New("zlcmutex: ZKConfig needs Servers and SessionTimeout")
	}
	c := &ZKClient{acl: zk.WorldACL(zk.PermAll), changed: make(chan struct{})}
	var logger zk.Logger = nopLogger{}
	if cfg.Logger != nil {
		logger = cfg.Logger
	}
	opts := append([]func(*zk.Conn){zk.WithEventCallback(c.onEvent), zk.WithLogger(logger)}, cfg.Options...)
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout, func(conn *zk.Conn) {
		for _, o := range opts {
			o(conn)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("zlcmutex: connect: %w", err)
	}
	c.mu.Lock()
	c.conn = conn
	if c.pending {
		c.pending = false
		c.setLocked(Session{ID: conn.SessionID(), State: StateConnected})
	}
	c.mu.Unlock()
	return c, nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// Conn returns the underlying connection (for what Client does not cover, such as
// the session password).
func (c *ZKClient) Conn() *zk.Conn { return c.conn }

// Close ends the session; its ephemeral nodes are deleted by the servers.
func (c *ZKClient) Close() {
	c.mu.Lock()
	c.closed = true
	c.setLocked(Session{ID: c.sess.ID, State: StateClosed})
	c.mu.Unlock()
	c.conn.Close()
}

// onEvent is go-zookeeper's event callback; it must not block.
func (c *ZKClient) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		if c.conn == nil {
			c.pending = true
			return
		}
		c.setLocked(Session{ID: c.conn.SessionID(), State: StateConnected})
	case zk.StateExpired:
		c.pending = false
		c.setLocked(Session{ID: c.sess.ID, State: StateExpired})
	case zk.StateDisconnected, zk.StateConnecting, zk.StateConnected:
		c.pending = false
		// After an expiry the library reconnects through these states; the session
		// stays expired until a new one is announced.
		if c.sess.State == StateConnected {
			c.setLocked(Session{ID: c.sess.ID, State: StateDisconnected})
		}
	}
}

// setLocked records a session state and wakes whoever waits for a change.
func (c *ZKClient) setLocked(s Session) {
	if s == c.sess {
		return
	}
	c.sess = s
	close(c.changed)
	c.changed = make(chan struct{})
}

// Session implements Client.
func (c *ZKClient) Session() (Session, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess, c.changed
}

// mapErr turns a go-zookeeper error into this package's sentinels.
func (c *ZKClient) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return ErrNoNode
	case errors.Is(err, zk.ErrNodeExists):
		return ErrNodeExists
	case errors.Is(err, zk.ErrBadVersion):
		return ErrBadVersion
	case errors.Is(err, zk.ErrNotEmpty):
		return ErrNotEmpty
	case errors.Is(err, zk.ErrSessionExpired):
		return ErrSessionExpired
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrSessionMoved):
		return ErrConnectionLoss
	}
	return fmt.Errorf("%w: %v", ErrUnknown, err)
}

func mapStat(st *zk.Stat) Stat {
	if st == nil {
		return Stat{}
	}
	return Stat{Czxid: st.Czxid, Mzxid: st.Mzxid, Version: st.Version, EphemeralOwner: st.EphemeralOwner}
}

// Create implements Client.
func (c *ZKClient) Create(path string, data []byte, flags CreateFlags) (string, error) {
	var f int32
	if flags&FlagEphemeral != 0 {
		f |= zk.FlagEphemeral
	}
	if flags&FlagSequential != 0 {
		f |= zk.FlagSequence
	}
	p, err := c.conn.Create(path, data, f, c.acl)
	return p, c.mapErr(err)
}

// Delete implements Client.
func (c *ZKClient) Delete(path string, version int32) error {
	return c.mapErr(c.conn.Delete(path, version))
}

// Get implements Client.
func (c *ZKClient) Get(path string) ([]byte, Stat, error) {
	data, st, err := c.conn.Get(path)
	if err != nil {
		return nil, Stat{}, c.mapErr(err)
	}
	return data, mapStat(st), nil
}

// GetW implements Client.
func (c *ZKClient) GetW(path string) ([]byte, Stat, <-chan Event, error) {
	data, st, zch, err := c.conn.GetW(path)
	if err != nil {
		return nil, Stat{}, nil, c.mapErr(err)
	}
	return data, mapStat(st), forward(zch, path), nil
}

// forward turns go-zookeeper's watch channel on path into this package's.
func forward(zch <-chan zk.Event, path string) <-chan Event {
	ch := make(chan Event, 1)
	go func() {
		ev, ok := <-zch
		if !ok {
			ch <- Event{Type: EventNotWatching, Path: path}
			return
		}
		ch <- Event{Type: mapEventType(ev.Type), Path: ev.Path}
	}()
	return ch
}

func mapEventType(t zk.EventType) EventType {
	switch t {
	case zk.EventNodeCreated:
		return EventNodeCreated
	case zk.EventNodeDeleted:
		return EventNodeDeleted
	case zk.EventNodeDataChanged:
		return EventNodeDataChanged
	case zk.EventNodeChildrenChanged:
		return EventNodeChildrenChanged
	}
	return EventNotWatching
}

// Children implements Client.
func (c *ZKClient) Children(path string) ([]string, error) {
	children, _, err := c.conn.Children(path)
	if err != nil {
		return nil, c.mapErr(err)
	}
	return children, nil
}

// ChildrenW implements ChildWatcher.
func (c *ZKClient) ChildrenW(path string) ([]string, <-chan Event, error) {
	children, _, zch, err := c.conn.ChildrenW(path)
	if err != nil {
		return nil, nil, c.mapErr(err)
	}
	return children, forward(zch, path), nil
}

// Set implements Client.
func (c *ZKClient) Set(path string, data []byte, version int32) (Stat, error) {
	st, err := c.conn.Set(path, data, version)
	if err != nil {
		return Stat{}, c.mapErr(err)
	}
	return mapStat(st), nil
}

// Multi implements Client.
func (c *ZKClient) Multi(ops ...Op) error {
	reqs := make([]any, len(ops))
	for i, op := range ops {
		switch op.Kind {
		case OpCheck:
			reqs[i] = &zk.CheckVersionRequest{Path: op.Path, Version: op.Version}
		case OpSet:
			reqs[i] = &zk.SetDataRequest{Path: op.Path, Data: op.Data, Version: op.Version}
		default:
			return fmt.Errorf("zlcmutex: multi op %d has unknown kind %d", i, op.Kind)
		}
	}
	res, err := c.conn.Multi(reqs...)
	if err == nil {
		return nil
	}
	// A multi the server refused reports, per op, OK for the ops before the one that
	// failed, that op's error, and a rollback code for the ops after it.
	if len(res) == len(ops) {
		for i, r := range res {
			if r.Error != nil {
				return &MultiError{Index: i, Err: c.mapErr(r.Error)}
			}
		}
	}
	return c.mapErr(err)
}

// Sync implements Client.
func (c *ZKClient) Sync(path string) error {
	_, err := c.conn.Sync(path)
	return c.mapErr(err)
}
