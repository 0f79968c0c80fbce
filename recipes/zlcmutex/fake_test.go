package zlcmutex

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// fakeZK is a FAKE: an in-memory stand-in for a ZooKeeper ensemble, for unit tests
// only. It keeps one linearizable tree shared by several fakeClients (one session
// each) and implements just what the lock relies on: sequential and ephemeral nodes,
// czxid/version/ephemeralOwner, one-shot data watches, atomic multi. Tests steer
// sessions (disconnect, reconnect, expire) and inject faults per request (a request
// dropped, or applied with its reply lost). It does not model followers, lag or
// timing; it is not the deterministic simulator.
type fakeZK struct {
	mu          sync.Mutex
	nodes       map[string]*fakeNode
	zxid        int64
	nextSession int64
	// seq is the next sequence number per parent path.
	seq     map[string]int64
	watches []fakeWatch
}

type fakeNode struct {
	data []byte
	stat Stat
}

type fakeWatch struct {
	path   string
	client *fakeClient
	ch     chan Event
}

func newFakeZK() *fakeZK {
	return &fakeZK{nodes: map[string]*fakeNode{"/": {}}, seq: map[string]int64{}, nextSession: 0x100}
}

// fault is what a test hook does to one request.
type fault int

const (
	faultNone fault = iota
	// faultDrop: the request is not applied; the client sees ErrConnectionLoss.
	faultDrop
	// faultLoseReply: the request is applied; the client sees ErrConnectionLoss.
	faultLoseReply
)

// fakeClient is one session's client of a fakeZK.
type fakeClient struct {
	zk      *fakeZK
	sess    Session // under zk.mu
	changed chan struct{}
	// hook, when set, decides the fault of each request (op is the method name).
	hook func(op, path string) fault
}

var _ Client = (*fakeClient)(nil)

// client returns a new connected client with a new session.
func (z *fakeZK) client() *fakeClient {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.nextSession++
	return &fakeClient{zk: z, sess: Session{ID: z.nextSession, State: StateConnected}, changed: make(chan struct{})}
}

// setLocked changes the client's session state and wakes its waiters.
func (c *fakeClient) setLocked(s Session) {
	c.sess = s
	close(c.changed)
	c.changed = make(chan struct{})
}

// disconnect cuts the client off; its session lives on.
func (c *fakeClient) disconnect() {
	c.zk.mu.Lock()
	defer c.zk.mu.Unlock()
	c.setLocked(Session{ID: c.sess.ID, State: StateDisconnected})
}

// reconnect ends a disconnect (same session) or, after an expiry, starts a new session.
func (c *fakeClient) reconnect() {
	z := c.zk
	z.mu.Lock()
	defer z.mu.Unlock()
	id := c.sess.ID
	if c.sess.State == StateExpired {
		z.nextSession++
		id = z.nextSession
	}
	c.setLocked(Session{ID: id, State: StateConnected})
}

// expire ends the client's session on the "servers": its ephemeral nodes are
// deleted (firing watches) and its own watches are dropped. It stays expired until
// reconnect.
func (c *fakeClient) expire() {
	z := c.zk
	z.mu.Lock()
	defer z.mu.Unlock()
	for p, n := range z.nodes {
		if n.stat.EphemeralOwner == c.sess.ID {
			z.deleteLocked(p)
		}
	}
	z.watches = slices.DeleteFunc(z.watches, func(w fakeWatch) bool {
		if w.client != c {
			return false
		}
		w.ch <- Event{Type: EventNotWatching, Path: w.path}
		return true
	})
	c.setLocked(Session{ID: c.sess.ID, State: StateExpired})
}

// begin runs the hook and checks the connection. apply says whether to apply the
// request; err (when not nil) is what the client returns.
func (c *fakeClient) begin(op, path string) (apply bool, err error) {
	c.zk.mu.Lock()
	hook, st := c.hook, c.sess.State
	c.zk.mu.Unlock()
	switch st {
	case StateClosed:
		return false, ErrClosed
	case StateExpired:
		return false, ErrSessionExpired
	case StateDisconnected:
		return false, ErrConnectionLoss
	}
	f := faultNone
	if hook != nil {
		f = hook(op, path)
	}
	switch f {
	case faultDrop:
		return false, ErrConnectionLoss
	case faultLoseReply:
		return true, ErrConnectionLoss
	}
	return true, nil
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func (c *fakeClient) Create(path string, data []byte, flags CreateFlags) (string, error) {
	apply, ferr := c.begin("Create", path)
	if !apply {
		return "", ferr
	}
	z := c.zk
	z.mu.Lock()
	defer z.mu.Unlock()
	parent := parentOf(path)
	if _, ok := z.nodes[parent]; !ok {
		return "", ErrNoNode
	}
	if flags&FlagSequential != 0 {
		path += fmt.Sprintf("%010d", z.seq[parent])
		z.seq[parent]++
	}
	if _, ok := z.nodes[path]; ok {
		return "", ErrNodeExists
	}
	z.zxid++
	n := &fakeNode{data: slices.Clone(data), stat: Stat{Czxid: z.zxid, Mzxid: z.zxid}}
	if flags&FlagEphemeral != 0 {
		n.stat.EphemeralOwner = c.sess.ID
	}
	z.nodes[path] = n
	if ferr != nil {
		return "", ferr
	}
	return path, nil
}

func (z *fakeZK) hasChildrenLocked(p string) bool {
	for q := range z.nodes {
		if q != "/" && parentOf(q) == p {
			return true
		}
	}
	return false
}

// deleteLocked removes p and fires its watches.
func (z *fakeZK) deleteLocked(p string) {
	z.zxid++
	delete(z.nodes, p)
	z.fireLocked(p, EventNodeDeleted)
}

func (z *fakeZK) fireLocked(p string, t EventType) {
	z.watches = slices.DeleteFunc(z.watches, func(w fakeWatch) bool {
		if w.path != p {
			return false
		}
		w.ch <- Event{Type: t, Path: p}
		return true
	})
}

func (c *fakeClient) Delete(path string, version int32) error {
	apply, ferr := c.begin("Delete", path)
	if !apply {
		return ferr
	}
	z := c.zk
	z.mu.Lock()
	defer z.mu.Unlock()
	n, ok := z.nodes[path]
	switch {
	case !ok:
		return ErrNoNode
	case version != -1 && version != n.stat.Version:
		return ErrBadVersion
	case z.hasChildrenLocked(path):
		return ErrNotEmpty
	}
	z.deleteLocked(path)
	return ferr
}

func (c *fakeClient) Get(path string) ([]byte, Stat, error) {
	data, st, _, err := c.get(path, false)
	return data, st, err
}

func (c *fakeClient) GetW(path string) ([]byte, Stat, <-chan Event, error) {
	return c.get(path, true)
}

func (c *fakeClient) get(path string, watch bool) ([]byte, Stat, <-chan Event, error) {
	apply, ferr := c.begin("Get", path)
	if !apply || ferr != nil {
		return nil, Stat{}, nil, ferr
	}
	z := c.zk
	z.mu.Lock()
	defer z.mu.Unlock()
	n, ok := z.nodes[path]
	if !ok {
		return nil, Stat{}, nil, ErrNoNode
	}
	var ch chan Event
	if watch {
		ch = make(chan Event, 1)
		z.watches = append(z.watches, fakeWatch{path: path, client: c, ch: ch})
	}
	return slices.Clone(n.data), n.stat, ch, nil
}

func (c *fakeClient) Children(path string) ([]string, error) {
	apply, ferr := c.begin("Children", path)
	if !apply || ferr != nil {
		return nil, ferr
	}
	return c.zk.children(path)
}

// children lists path's children's names, sorted.
func (z *fakeZK) children(path string) ([]string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if _, ok := z.nodes[path]; !ok {
		return nil, ErrNoNode
	}
	var names []string
	for q := range z.nodes {
		if q != "/" && parentOf(q) == path {
			names = append(names, q[len(path)+1:])
		}
	}
	slices.Sort(names)
	return names, nil
}

// checkLocked is what a check or set op needs: the node at the version.
func (z *fakeZK) checkLocked(path string, version int32) (*fakeNode, error) {
	n, ok := z.nodes[path]
	switch {
	case !ok:
		return nil, ErrNoNode
	case version != -1 && version != n.stat.Version:
		return nil, ErrBadVersion
	}
	return n, nil
}

func (z *fakeZK) setLocked(n *fakeNode, path string, data []byte) Stat {
	z.zxid++
	n.data = slices.Clone(data)
	n.stat.Version++
	n.stat.Mzxid = z.zxid
	z.fireLocked(path, EventNodeDataChanged)
	return n.stat
}

func (c *fakeClient) Set(path string, data []byte, version int32) (Stat, error) {
	apply, ferr := c.begin("Set", path)
	if !apply {
		return Stat{}, ferr
	}
	z := c.zk
	z.mu.Lock()
	defer z.mu.Unlock()
	n, err := z.checkLocked(path, version)
	if err != nil {
		return Stat{}, err
	}
	st := z.setLocked(n, path, data)
	return st, ferr
}

func (c *fakeClient) Multi(ops ...Op) error {
	apply, ferr := c.begin("Multi", "")
	if !apply {
		return ferr
	}
	z := c.zk
	z.mu.Lock()
	defer z.mu.Unlock()
	for i, op := range ops {
		if _, err := z.checkLocked(op.Path, op.Version); err != nil {
			return &MultiError{Index: i, Err: err}
		}
	}
	for _, op := range ops {
		if op.Kind == OpSet {
			z.setLocked(z.nodes[op.Path], op.Path, op.Data)
		}
	}
	return ferr
}

func (c *fakeClient) Sync(path string) error {
	_, ferr := c.begin("Sync", path)
	return ferr
}

func (c *fakeClient) Session() (Session, <-chan struct{}) {
	c.zk.mu.Lock()
	defer c.zk.mu.Unlock()
	return c.sess, c.changed
}

// owner returns the ephemeral owner of path, or -1 when it does not exist.
func (z *fakeZK) owner(path string) int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	if n, ok := z.nodes[path]; ok {
		return n.stat.EphemeralOwner
	}
	return -1
}

// watchers counts the watches set on path.
func (z *fakeZK) watchers(path string) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	n := 0
	for _, w := range z.watches {
		if w.path == path {
			n++
		}
	}
	return n
}
