package zksim

import (
	"fmt"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// Client is one simulated ZooKeeper client: one connection, with one session at a
// time. It implements zlcmutex.Client, so a recipe written against that interface runs
// on it unchanged. Every request blocks until the scheduler (Sim.Run, Sim.LoseReply,
// Sim.Drop, ...) decides what becomes of it; Session never blocks.
//
// A Client's methods may be called from any goroutine of the simulation's bubble.
type Client struct {
	sim  *Sim
	name string

	// Under sim.mu.
	sess    zlcmutex.Session
	changed chan struct{}
	// pending are the requests sent and not answered yet, in order.
	pending []*request
	// queue holds the watch events fired for this client and not delivered yet.
	queue []delivery
	// dropped are the watches the servers dropped when a session of this client ended,
	// to be told EventNotWatching once the client learns of the end.
	dropped []delivery
	// dead: crashed or closed; every call fails with ErrClosed.
	dead bool
	// wire is the server's side of a wire client's connections; nil for an
	// in-process client.
	wire *wireEnd
}

var _ zlcmutex.Client = (*Client)(nil)

// delivery is a fired watch event on its way to the client.
type delivery struct {
	ch chan zlcmutex.Event
	ev zlcmutex.Event
}

// reqKind is what a request asks for.
type reqKind int

const (
	reqCreate reqKind = iota + 1
	reqDelete
	reqGet
	reqExists
	reqChildren
	reqSet
	reqMulti
	reqSync
	// Only wire clients send these.
	reqCheck
	reqTxn
	reqAuth
	reqSetWatches
	reqWatches
	// reqFixed is answered with its wireReq's code whatever the tree holds.
	reqFixed
)

// request is one request of a client, waiting for the scheduler.
type request struct {
	kind    reqKind
	path    string
	data    []byte
	flags   zlcmutex.CreateFlags
	version int32
	ops     []zlcmutex.Op
	watch   bool
	reply   chan reply
	// container: create a container node (wire clients only).
	container bool
	// wire is set for a request that came over the wire; its reply goes back there.
	wire *wireReq
}

// reply is what a request returns.
type reply struct {
	path     string
	data     []byte
	stat     Stat
	exists   bool
	children []string
	ev       <-chan zlcmutex.Event
	err      error
	// results are a wire multi's.
	results []txnResult
}

// String describes the request for a trace, e.g. "getData /a (watch)".
func (r *request) String() string {
	if r.wire != nil {
		return describeWire(r)
	}
	return r.plain()
}

// plain describes the request as the in-process client sends it.
func (r *request) plain() string {
	var b strings.Builder
	switch r.kind {
	case reqCreate:
		b.WriteString("create ")
		b.WriteString(r.path)
		var kinds []string
		if r.flags&zlcmutex.FlagEphemeral != 0 {
			kinds = append(kinds, "ephemeral")
		}
		if r.flags&zlcmutex.FlagSequential != 0 {
			kinds = append(kinds, "sequential")
		}
		if len(kinds) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(kinds, ", "))
		}
		return b.String()
	case reqDelete:
		return fmt.Sprintf("delete %s v%d", r.path, r.version)
	case reqGet:
		b.WriteString("getData " + r.path)
	case reqExists:
		b.WriteString("exists " + r.path)
	case reqChildren:
		b.WriteString("getChildren " + r.path)
	case reqSet:
		return fmt.Sprintf("setData %s v%d", r.path, r.version)
	case reqMulti:
		parts := make([]string, len(r.ops))
		for i, op := range r.ops {
			switch op.Kind {
			case zlcmutex.OpCheck:
				parts[i] = fmt.Sprintf("check %s v%d", op.Path, op.Version)
			case zlcmutex.OpSet:
				parts[i] = fmt.Sprintf("setData %s v%d", op.Path, op.Version)
			default:
				parts[i] = fmt.Sprintf("op(%d) %s", int(op.Kind), op.Path)
			}
		}
		return "multi [" + strings.Join(parts, "; ") + "]"
	case reqSync:
		return "sync " + r.path
	}
	if r.watch {
		b.WriteString(" (watch)")
	}
	return b.String()
}

// describe renders a reply for a trace.
func (r *request) describe(rep reply) string {
	if r.wire != nil && r.wire.code != codeOK {
		return fmt.Sprintf("error %d", r.wire.code)
	}
	if rep.err != nil {
		return rep.err.Error()
	}
	switch r.kind {
	case reqCreate:
		return rep.path
	case reqGet:
		return fmt.Sprintf("czxid %d, owner 0x%x", rep.stat.Czxid, uint64(rep.stat.EphemeralOwner))
	case reqExists:
		if !rep.exists {
			return "no node"
		}
		return fmt.Sprintf("czxid %d", rep.stat.Czxid)
	case reqChildren:
		return "[" + strings.Join(rep.children, " ") + "]"
	case reqSet:
		return fmt.Sprintf("version %d", rep.stat.Version)
	}
	return "ok"
}

// Name is the client's name, as given to Sim.NewClient.
func (c *Client) Name() string { return c.name }

// call sends r and waits for the scheduler's answer.
func (c *Client) call(r *request) reply {
	c.sim.mu.Lock()
	if c.dead {
		c.sim.mu.Unlock()
		return reply{err: zlcmutex.ErrClosed}
	}
	r.reply = make(chan reply, 1)
	c.pending = append(c.pending, r)
	c.sim.requests++
	c.sim.mu.Unlock()
	return <-r.reply
}

// Create implements zlcmutex.Client.
func (c *Client) Create(path string, data []byte, flags zlcmutex.CreateFlags) (string, error) {
	rep := c.call(&request{kind: reqCreate, path: path, data: data, flags: flags})
	return rep.path, rep.err
}

// Delete implements zlcmutex.Client.
func (c *Client) Delete(path string, version int32) error {
	return c.call(&request{kind: reqDelete, path: path, version: version}).err
}

// Get implements zlcmutex.Client.
func (c *Client) Get(path string) ([]byte, zlcmutex.Stat, error) {
	rep := c.call(&request{kind: reqGet, path: path})
	return rep.data, rep.stat.short(), rep.err
}

// GetW implements zlcmutex.Client: the watch fires on a change of the node's data or
// its deletion, and its event reaches the channel when the scheduler delivers it.
func (c *Client) GetW(path string) ([]byte, zlcmutex.Stat, <-chan zlcmutex.Event, error) {
	rep := c.call(&request{kind: reqGet, path: path, watch: true})
	return rep.data, rep.stat.short(), rep.ev, rep.err
}

// GetStat is Get with the node's full stat.
func (c *Client) GetStat(path string) ([]byte, Stat, error) {
	rep := c.call(&request{kind: reqGet, path: path})
	return rep.data, rep.stat, rep.err
}

// Exists reports whether the node exists, with its stat.
func (c *Client) Exists(path string) (bool, Stat, error) {
	rep := c.call(&request{kind: reqExists, path: path})
	return rep.exists, rep.stat, rep.err
}

// ExistsW is Exists that also leaves a one-shot watch: on the node's creation when it
// does not exist, on a change of its data or its deletion when it does.
func (c *Client) ExistsW(path string) (bool, Stat, <-chan zlcmutex.Event, error) {
	rep := c.call(&request{kind: reqExists, path: path, watch: true})
	return rep.exists, rep.stat, rep.ev, rep.err
}

// Children implements zlcmutex.Client. The names come in no particular order.
func (c *Client) Children(path string) ([]string, error) {
	rep := c.call(&request{kind: reqChildren, path: path})
	return rep.children, rep.err
}

// ChildrenW is Children that also leaves a one-shot watch, which fires when a child
// is added or removed or the node is deleted. It sets no watch on ErrNoNode.
func (c *Client) ChildrenW(path string) ([]string, <-chan zlcmutex.Event, error) {
	rep := c.call(&request{kind: reqChildren, path: path, watch: true})
	return rep.children, rep.ev, rep.err
}

// Set implements zlcmutex.Client.
func (c *Client) Set(path string, data []byte, version int32) (zlcmutex.Stat, error) {
	rep := c.call(&request{kind: reqSet, path: path, data: data, version: version})
	return rep.stat.short(), rep.err
}

// Multi implements zlcmutex.Client: checks and sets in one transaction.
func (c *Client) Multi(ops ...zlcmutex.Op) error {
	return c.call(&request{kind: reqMulti, ops: ops}).err
}

// Sync implements zlcmutex.Client. The simulated ensemble is one linearizable tree,
// so a sync only takes a scheduler step.
func (c *Client) Sync(path string) error {
	return c.call(&request{kind: reqSync, path: path}).err
}

// Session implements zlcmutex.Client.
func (c *Client) Session() (zlcmutex.Session, <-chan struct{}) {
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	return c.sess, c.changed
}

// setSession changes what the client knows of its session and wakes its waiters.
// Under sim.mu.
func (c *Client) setSession(s zlcmutex.Session) {
	if s == c.sess {
		return
	}
	c.sess = s
	close(c.changed)
	c.changed = make(chan struct{})
}

// queueEvent queues a fired watch event for delivery. Under sim.mu.
func (c *Client) queueEvent(ch chan zlcmutex.Event, ev zlcmutex.Event) {
	if !c.dead {
		c.queue = append(c.queue, delivery{ch: ch, ev: ev})
	}
}

// answer sends r its reply. Under sim.mu.
func (c *Client) answer(r *request, rep reply) {
	if r.wire != nil {
		c.wire.send(encodeReply(r, rep, c.sim.srv.zxid))
		return
	}
	r.reply <- rep
}

// failPending answers every pending request with err; none was applied. A wire
// client's requests are not answered: its connection breaks, and its library fails
// them. Under sim.mu.
func (c *Client) failPending(err error) {
	if c.wire != nil {
		c.pending = nil
		return
	}
	for _, r := range c.pending {
		r.reply <- reply{err: err}
	}
	c.pending = nil
}

// learnExpired is the client hearing that its session ended: the session state
// says expired, pending requests fail, and every watch of the session (fired and not
// delivered, or dropped by the servers) is to be told EventNotWatching. Under sim.mu.
func (c *Client) learnExpired() {
	c.setSession(zlcmutex.Session{ID: c.sess.ID, State: zlcmutex.StateExpired})
	c.failPending(zlcmutex.ErrSessionExpired)
	queue := make([]delivery, 0, len(c.queue)+len(c.dropped))
	for _, d := range append(c.queue, c.dropped...) {
		queue = append(queue, delivery{ch: d.ch, ev: zlcmutex.Event{Type: zlcmutex.EventNotWatching, Path: d.ev.Path}})
	}
	c.queue, c.dropped = queue, nil
}
