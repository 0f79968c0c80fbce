package zksim

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// Stat is a znode's metadata, the fields ZooKeeper keeps.
type Stat struct {
	// Czxid is the zxid of the transaction that created the node.
	Czxid int64
	// Mzxid is the zxid of the transaction that last set the node's data.
	Mzxid int64
	// Pzxid is the zxid of the transaction that last added or removed a child.
	Pzxid int64
	// Version is the number of changes to the node's data.
	Version int32
	// Cversion is the number of changes to the node's children.
	Cversion int32
	// EphemeralOwner is the session that owns an ephemeral node; 0 otherwise.
	EphemeralOwner int64
	// NumChildren is the number of children.
	NumChildren int32
	// DataLength is the length of the node's data.
	DataLength int32
}

// short is the part of the stat that zlcmutex.Client returns.
func (s Stat) short() zlcmutex.Stat {
	return zlcmutex.Stat{Czxid: s.Czxid, Mzxid: s.Mzxid, Version: s.Version, EphemeralOwner: s.EphemeralOwner}
}

// znode is one node of the tree.
type znode struct {
	data     []byte
	stat     Stat
	children map[string]bool
	// container: a container node (Curator makes its parents so); ZooKeeper deletes
	// one once it is empty, on a timer the simulation does not run (docs/zksim.md).
	container bool
}

// watchKind is which table a watch sits in, as in ZooKeeper: data watches (getData,
// exists) and child watches (getChildren).
type watchKind int

const (
	dataWatch watchKind = iota + 1
	childWatch
)

// watch is a one-shot watch left by a request of client under session.
type watch struct {
	client  *Client
	session int64
	path    string
	kind    watchKind
	ch      chan zlcmutex.Event
}

// session is a session as the servers know it.
type session struct {
	id     int64
	client *Client
	alive  bool
	// timeout is a wire session's negotiated timeout, in ms.
	timeout int32
}

// server is the ensemble's replicated state: one linearizable tree (every read sees
// every write committed before it), the sessions and the watches. Every write is a
// transaction with the next zxid, as in ZooKeeper: a multi (all its ops together), a
// session's end (all its ephemeral nodes), and a write that fails (an error
// transaction) too.
type server struct {
	nodes       map[string]*znode
	zxid        int64
	sessions    map[int64]*session
	nextSession int64
	// watches in registration order, so that triggering is deterministic.
	watches []*watch
	// byCreation orders children by creation (czxid) rather than by a hash of their
	// names: a wire client's names carry random GUIDs, which must never decide an
	// order.
	byCreation bool
	// deferred, during a multi, collects the watches to trigger once it commits.
	deferred *[]firing
}

// firing is a watch trigger put off until a multi commits.
type firing struct {
	path string
	kind watchKind
	typ  zlcmutex.EventType
}

func newServer() *server {
	return &server{
		nodes:       map[string]*znode{"/": {children: map[string]bool{}}},
		sessions:    map[int64]*session{},
		nextSession: 0x1000,
	}
}

// newWireServer is a server for wire clients: children by creation, and the
// /zookeeper nodes a real server has (Curator reads /zookeeper/config).
func newWireServer() *server {
	s := newServer()
	s.byCreation = true
	for _, p := range []string{"/zookeeper", "/zookeeper/config", "/zookeeper/quota"} {
		s.doCreate(0, p, nil, 0, false)
	}
	// ZooKeeper's DataTree makes them outside any transaction: no zxid, and the
	// root's first sequential child is numbered 0.
	for _, n := range s.nodes {
		n.stat = Stat{NumChildren: n.stat.NumChildren}
	}
	return s
}

// errBadArguments is ZooKeeper's BADARGUMENTS: a malformed path or request. It is an
// unknown-outcome error to zlcmutex, which never sends one.
var errBadArguments = fmt.Errorf("%w: bad arguments", zlcmutex.ErrUnknown)

// errNoChildrenForEphemerals is ZooKeeper's NOCHILDRENFOREPHEMERALS.
var errNoChildrenForEphemerals = fmt.Errorf("%w: no children for ephemerals", zlcmutex.ErrUnknown)

// validPath reports whether p is an absolute znode path: "/" or slash-separated
// non-empty names, no trailing slash, no "." or ".." names.
func validPath(p string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return false
	}
	for _, name := range strings.Split(p[1:], "/") {
		if name == "" || name == "." || name == ".." {
			return false
		}
	}
	return true
}

func (s *server) newSession(c *Client) int64 {
	s.nextSession++
	s.sessions[s.nextSession] = &session{id: s.nextSession, client: c, alive: true}
	return s.nextSession
}

func (s *server) alive(id int64) bool {
	sess := s.sessions[id]
	return sess != nil && sess.alive
}

// createNode creates a node for session sid (a container node when container is
// set); a sequential node's name gets the parent's cversion, ten digits, as
// ZooKeeper does.
func (s *server) createNode(sid int64, p string, data []byte, flags zlcmutex.CreateFlags, container bool) (string, error) {
	p, err := s.checkCreate(p, flags)
	if err != nil {
		return "", err
	}
	s.zxid++
	s.doCreate(sid, p, data, flags, container)
	return p, nil
}

// checkCreate returns the path a create makes (with the sequence number of a
// sequential node), or why it cannot.
func (s *server) checkCreate(p string, flags zlcmutex.CreateFlags) (string, error) {
	if flags&zlcmutex.FlagSequential != 0 {
		parent, ok := s.nodes[path.Dir(p)]
		if !ok || !validPath(path.Dir(p)) {
			return "", zlcmutex.ErrNoNode
		}
		p = fmt.Sprintf("%s%010d", p, parent.stat.Cversion)
	}
	if !validPath(p) || p == "/" {
		return "", errBadArguments
	}
	parentPath := path.Dir(p)
	parent, ok := s.nodes[parentPath]
	switch {
	case !ok:
		return "", zlcmutex.ErrNoNode
	case parent.stat.EphemeralOwner != 0:
		return "", errNoChildrenForEphemerals
	case s.nodes[p] != nil:
		return "", zlcmutex.ErrNodeExists
	}
	return p, nil
}

// doCreate creates the node at p, which checkCreate allowed, in the current
// transaction.
func (s *server) doCreate(sid int64, p string, data []byte, flags zlcmutex.CreateFlags, container bool) {
	parentPath := path.Dir(p)
	parent := s.nodes[parentPath]
	n := &znode{data: slices.Clone(data), children: map[string]bool{}, container: container}
	n.stat = Stat{Czxid: s.zxid, Mzxid: s.zxid, Pzxid: s.zxid, DataLength: int32(len(data))}
	if flags&zlcmutex.FlagEphemeral != 0 {
		n.stat.EphemeralOwner = sid
	}
	s.nodes[p] = n
	parent.children[path.Base(p)] = true
	parent.stat.Cversion++
	parent.stat.NumChildren++
	parent.stat.Pzxid = s.zxid
	s.trigger(p, dataWatch, zlcmutex.EventNodeCreated)
	s.trigger(parentPath, childWatch, zlcmutex.EventNodeChildrenChanged)
}

// checkDelete says why p cannot be deleted at version, or nil.
func (s *server) checkDelete(p string, version int32) error {
	n, ok := s.nodes[p]
	switch {
	case !validPath(p) || p == "/":
		return errBadArguments
	case !ok:
		return zlcmutex.ErrNoNode
	case version != -1 && version != n.stat.Version:
		return zlcmutex.ErrBadVersion
	case len(n.children) > 0:
		return zlcmutex.ErrNotEmpty
	}
	return nil
}

func (s *server) delete(p string, version int32) error {
	if err := s.checkDelete(p, version); err != nil {
		return err
	}
	s.zxid++
	s.remove(p)
	return nil
}

// remove deletes the leaf p in the current transaction and fires its watches.
func (s *server) remove(p string) {
	delete(s.nodes, p)
	parentPath := path.Dir(p)
	parent := s.nodes[parentPath]
	delete(parent.children, path.Base(p))
	parent.stat.Cversion++
	parent.stat.NumChildren--
	parent.stat.Pzxid = s.zxid
	s.trigger(p, dataWatch, zlcmutex.EventNodeDeleted)
	s.trigger(p, childWatch, zlcmutex.EventNodeDeleted)
	s.trigger(parentPath, childWatch, zlcmutex.EventNodeChildrenChanged)
}

func (s *server) get(p string) ([]byte, Stat, error) {
	if !validPath(p) {
		return nil, Stat{}, errBadArguments
	}
	n, ok := s.nodes[p]
	if !ok {
		return nil, Stat{}, zlcmutex.ErrNoNode
	}
	return slices.Clone(n.data), n.stat, nil
}

func (s *server) children(p string) ([]string, Stat, error) {
	if !validPath(p) {
		return nil, Stat{}, errBadArguments
	}
	n, ok := s.nodes[p]
	if !ok {
		return nil, Stat{}, zlcmutex.ErrNoNode
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	if s.byCreation {
		czxid := func(name string) int64 { return s.nodes[path.Join(p, name)].stat.Czxid }
		slices.SortFunc(names, func(a, b string) int { return cmp.Compare(czxid(a), czxid(b)) })
		return names, n.stat, nil
	}
	// ZooKeeper returns children in no particular order (a recipe must sort them).
	// Here the order is a hash of the name and the parent's cversion: scrambled, and
	// the same in every replay.
	salt := uint32(n.stat.Cversion)
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(scramble(a, salt), scramble(b, salt)), strings.Compare(a, b))
	})
	return names, n.stat, nil
}

// scramble is FNV-1a of s, seeded with salt.
func scramble(s string, salt uint32) uint32 {
	h := 2166136261 ^ salt
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// checkSet says why p's data cannot be set at version, or nil.
func (s *server) checkSet(p string, version int32) error {
	n, ok := s.nodes[p]
	switch {
	case !validPath(p):
		return errBadArguments
	case !ok:
		return zlcmutex.ErrNoNode
	case version != -1 && version != n.stat.Version:
		return zlcmutex.ErrBadVersion
	}
	return nil
}

func (s *server) set(p string, data []byte, version int32) (Stat, error) {
	if err := s.checkSet(p, version); err != nil {
		return Stat{}, err
	}
	s.zxid++
	return s.apply(p, data), nil
}

// apply sets p's data in the current transaction and fires its watches.
func (s *server) apply(p string, data []byte) Stat {
	n := s.nodes[p]
	n.data = slices.Clone(data)
	n.stat.Version++
	n.stat.Mzxid = s.zxid
	n.stat.DataLength = int32(len(data))
	s.trigger(p, dataWatch, zlcmutex.EventNodeDataChanged)
	return n.stat
}

// multi applies ops in one transaction (one zxid), all or none.
func (s *server) multi(ops []zlcmutex.Op) error {
	for i, op := range ops {
		var err error
		switch op.Kind {
		case zlcmutex.OpCheck:
			n, ok := s.nodes[op.Path]
			switch {
			case !validPath(op.Path):
				err = errBadArguments
			case !ok:
				err = zlcmutex.ErrNoNode
			case op.Version != -1 && op.Version != n.stat.Version:
				err = zlcmutex.ErrBadVersion
			}
		case zlcmutex.OpSet:
			err = s.checkSet(op.Path, op.Version)
		default:
			err = errBadArguments
		}
		if err != nil {
			return &zlcmutex.MultiError{Index: i, Err: err}
		}
	}
	s.zxid++
	for _, op := range ops {
		if op.Kind == zlcmutex.OpSet {
			s.apply(op.Path, op.Data)
		}
	}
	return nil
}

// addWatch leaves a one-shot watch of kind on p for client's session sid.
func (s *server) addWatch(c *Client, sid int64, p string, kind watchKind) <-chan zlcmutex.Event {
	if c.wire != nil {
		// A connection has at most one watch of a kind on a path (ZooKeeper's
		// WatchManager keeps a set of watchers per path); its events go on the wire.
		if !slices.ContainsFunc(s.watches, func(w *watch) bool { return w.client == c && w.path == p && w.kind == kind }) {
			s.watches = append(s.watches, &watch{client: c, session: sid, path: p, kind: kind})
		}
		return nil
	}
	w := &watch{client: c, session: sid, path: p, kind: kind, ch: make(chan zlcmutex.Event, 1)}
	s.watches = append(s.watches, w)
	return w.ch
}

// trigger fires (and removes) the watches of kind on p: each event is queued for
// delivery to its client, which gets it when the scheduler says.
func (s *server) trigger(p string, kind watchKind, t zlcmutex.EventType) {
	if s.deferred != nil {
		*s.deferred = append(*s.deferred, firing{p, kind, t})
		return
	}
	s.watches = slices.DeleteFunc(s.watches, func(w *watch) bool {
		if w.path != p || w.kind != kind {
			return false
		}
		w.client.queueEvent(w.ch, zlcmutex.Event{Type: t, Path: p})
		return true
	})
}

// closeSession ends session sid in one transaction: its ephemeral nodes are deleted
// (firing watches) and its watches are dropped; they are returned, for the client to
// hear EventNotWatching on once it learns of the end.
func (s *server) closeSession(sid int64) []delivery {
	sess := s.sessions[sid]
	if sess == nil || !sess.alive {
		return nil
	}
	sess.alive = false
	var dropped []delivery
	s.watches = slices.DeleteFunc(s.watches, func(w *watch) bool {
		if w.session != sid {
			return false
		}
		dropped = append(dropped, delivery{ch: w.ch, ev: zlcmutex.Event{Type: zlcmutex.EventNotWatching, Path: w.path}})
		return true
	})
	var eph []string
	for p, n := range s.nodes {
		if n.stat.EphemeralOwner == sid {
			eph = append(eph, p)
		}
	}
	slices.Sort(eph)
	s.zxid++
	// Ephemeral nodes have no children, so any order deletes them all.
	for _, p := range eph {
		s.remove(p)
	}
	return dropped
}

// txnResult is the result of one operation of a multi.
type txnResult struct {
	// code is the operation's error code; failed marks an ErrorResult (every result
	// of a multi that failed).
	code   int32
	failed bool
	path   string
	stat   Stat
}

// txn applies a multi's operations (create, delete, setData, check) for session sid
// in one transaction: all of them, their watches fired in order once every one
// succeeded, or none. On failure the results are ZooKeeper's: ok before the failing
// operation, its error at it, RUNTIMEINCONSISTENCY after it.
func (s *server) txn(sid int64, ops []txnOp) ([]txnResult, error) {
	nodes, zxid := s.snapshot(), s.zxid
	var fired []firing
	s.deferred = &fired
	s.zxid++
	res := make([]txnResult, len(ops))
	for i, op := range ops {
		r, err := s.txnStep(sid, op)
		if err == nil {
			res[i] = r
			continue
		}
		s.nodes, s.zxid, s.deferred = nodes, zxid, nil
		for j := range res {
			switch {
			case j < i:
				res[j] = txnResult{failed: true}
			case j == i:
				res[j] = txnResult{failed: true, code: errCode(err)}
			default:
				res[j] = txnResult{failed: true, code: codeRuntimeInconsistency}
			}
		}
		return res, err
	}
	s.deferred = nil
	for _, f := range fired {
		s.trigger(f.path, f.kind, f.typ)
	}
	return res, nil
}

// txnStep applies one operation of a multi in the current transaction.
func (s *server) txnStep(sid int64, op txnOp) (txnResult, error) {
	switch op.op {
	case opCreate, opCreate2, opCreateContainer:
		p, err := s.checkCreate(op.path, op.flags)
		if err != nil {
			return txnResult{}, err
		}
		s.doCreate(sid, p, op.data, op.flags, op.container)
		return txnResult{path: p, stat: s.nodes[p].stat}, nil
	case opDelete:
		if err := s.checkDelete(op.path, op.version); err != nil {
			return txnResult{}, err
		}
		s.remove(op.path)
		return txnResult{}, nil
	case opSetData:
		if err := s.checkSet(op.path, op.version); err != nil {
			return txnResult{}, err
		}
		return txnResult{stat: s.apply(op.path, op.data)}, nil
	case opCheck:
		n, ok := s.nodes[op.path]
		switch {
		case !validPath(op.path):
			return txnResult{}, errBadArguments
		case !ok:
			return txnResult{}, zlcmutex.ErrNoNode
		case op.version != -1 && op.version != n.stat.Version:
			return txnResult{}, zlcmutex.ErrBadVersion
		}
		return txnResult{}, nil
	}
	return txnResult{}, errBadArguments
}

// snapshot copies the tree, for a multi to roll back to.
func (s *server) snapshot() map[string]*znode {
	out := make(map[string]*znode, len(s.nodes))
	for p, n := range s.nodes {
		c := *n
		c.children = maps.Clone(n.children)
		out[p] = &c
	}
	return out
}

// dropWatches removes every watch a wire client's connection left: ZooKeeper keeps
// watches per connection, and the client sets them again (setWatches) when it
// reconnects.
func (s *server) dropWatches(c *Client) {
	s.watches = slices.DeleteFunc(s.watches, func(w *watch) bool { return w.client == c })
}

// setWatches is ZooKeeper's DataTree.setWatches for a reconnected client whose last
// zxid was rel: a watch whose event it missed fires now, any other is set again.
// Paths are taken in sorted order, whatever order the client sent them in.
func (s *server) setWatches(c *Client, sid, rel int64, data, exist, child []string) {
	fire := func(p string, t zlcmutex.EventType) { c.queueEvent(nil, zlcmutex.Event{Type: t, Path: p}) }
	// rearm fires NodeDeleted for a missing node, changed for one whose zxid (of
	// the kind the watch is about) is newer than rel, and sets the watch again
	// otherwise.
	rearm := func(paths []string, kind watchKind, zxid func(Stat) int64, changed zlcmutex.EventType) {
		for _, p := range sortedUnique(paths) {
			switch n, ok := s.nodes[p]; {
			case !ok:
				fire(p, zlcmutex.EventNodeDeleted)
			case zxid(n.stat) > rel:
				fire(p, changed)
			default:
				s.addWatch(c, sid, p, kind)
			}
		}
	}
	rearm(data, dataWatch, func(st Stat) int64 { return st.Mzxid }, zlcmutex.EventNodeDataChanged)
	for _, p := range sortedUnique(exist) {
		if _, ok := s.nodes[p]; ok {
			fire(p, zlcmutex.EventNodeCreated)
		} else {
			s.addWatch(c, sid, p, dataWatch)
		}
	}
	rearm(child, childWatch, func(st Stat) int64 { return st.Pzxid }, zlcmutex.EventNodeChildrenChanged)
}

// checkWatches answers checkWatches (remove false) and removeWatches (remove true)
// for a wire client's watches on p of type wtype (1 children, 2 data, 3 any):
// errNoWatcher when it has none.
func (s *server) checkWatches(c *Client, p string, wtype int32, remove bool) error {
	match := func(w *watch) bool {
		return w.client == c && w.path == p &&
			(wtype == 3 || wtype == 1 && w.kind == childWatch || wtype == 2 && w.kind == dataWatch)
	}
	if !slices.ContainsFunc(s.watches, match) {
		return errNoWatcher
	}
	if remove {
		s.watches = slices.DeleteFunc(s.watches, match)
	}
	return nil
}
