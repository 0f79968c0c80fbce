package zksim

import (
	"cmp"
	"fmt"
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
}

func newServer() *server {
	return &server{
		nodes:       map[string]*znode{"/": {children: map[string]bool{}}},
		sessions:    map[int64]*session{},
		nextSession: 0x1000,
	}
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

// create creates a node for session sid; a sequential node's name gets the parent's
// cversion, ten digits, as ZooKeeper does.
func (s *server) create(sid int64, p string, data []byte, flags zlcmutex.CreateFlags) (string, error) {
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
	s.zxid++
	n := &znode{data: slices.Clone(data), children: map[string]bool{}}
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
	return p, nil
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
	w := &watch{client: c, session: sid, path: p, kind: kind, ch: make(chan zlcmutex.Event, 1)}
	s.watches = append(s.watches, w)
	return w.ch
}

// trigger fires (and removes) the watches of kind on p: each event is queued for
// delivery to its client, which gets it when the scheduler says.
func (s *server) trigger(p string, kind watchKind, t zlcmutex.EventType) {
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
