package zksim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// Sim is a simulated ZooKeeper ensemble with its clients, and the scheduler that
// decides everything that happens to them: which pending request reaches the servers
// next, whether its reply comes back, when a fired watch is delivered, when a
// connection breaks, a session expires, a client crashes, or the clock moves.
//
// A Sim lives inside a testing/synctest bubble (synctest.Test): the recipe under test
// runs in goroutines of the bubble, each blocked in a Client call, on a watch or
// session channel, or on a timer, and every scheduler method returns only once every
// goroutine it woke is blocked again (synctest.Wait). Nothing moves between two
// scheduler calls, so a run is a function of the sequence of scheduler calls. The
// clock is the bubble's: it moves only in Tick.
//
// Scheduler methods must be called from one goroutine, the bubble's root; they fail
// (with an error saying why) when what they ask for is not possible now.
type Sim struct {
	mu      sync.Mutex
	srv     *server
	clients []*Client
	// requests counts the requests ever sent, so that a caller can tell whether a
	// step made a recipe do anything.
	requests int
	// notes are what wire connections did on their own since TakeNotes.
	notes simsched.Notes
	// realTime: a TCP server's simulation (Server), driven as requests come, in no
	// bubble; Settle does nothing.
	realTime bool
	// serve is a TCP server's fault plan and random source; nil in a bubble.
	tcp *serveState
}

// Trace says what a scheduler step did, for a run's story. It is formatted only when
// printed, so that runs nobody reads cost no formatting.
type Trace struct {
	format string
	args   []any
}

func tracef(format string, args ...any) Trace { return Trace{format: format, args: args} }

// String renders the trace.
func (t Trace) String() string {
	if t.format == "" {
		return ""
	}
	return fmt.Sprintf(t.format, t.args...)
}

// replyText renders a request's reply.
type replyText struct {
	r   *request
	rep reply
}

func (t replyText) String() string { return t.r.describe(t.rep) }

// New returns a simulated ensemble with an empty tree and no clients.
func New() *Sim { return &Sim{srv: newServer()} }

// NewWire returns a simulated ensemble for wire clients (NewWireClient): its tree
// has the /zookeeper nodes of a real server, and children come ordered by creation,
// never by name (a wire client's names may hold random GUIDs).
func NewWire() *Sim { return &Sim{srv: newWireServer()} }

// NewWireClient returns a wire client: a process whose own ZooKeeper library
// connects through the simulator's dialer and host provider (WireClient.Option). Its
// first connection needs no scheduler step; it is established (a new session) once
// the library is started and the bubble settles. The scheduler methods take it like
// any client; its zlcmutex.Client methods are not for use.
func (s *Sim) NewWireClient(name string) *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Client{sim: s, name: name, changed: make(chan struct{})}
	c.sess = zlcmutex.Session{State: zlcmutex.StateDisconnected}
	c.wire = &wireEnd{c: c, permits: make(chan struct{}, 1), dead: make(chan struct{})}
	c.wire.permits <- struct{}{}
	s.clients = append(s.clients, c)
	return c
}

// NewClient returns a new client, connected, with a new session.
func (s *Sim) NewClient(name string) *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Client{sim: s, name: name, changed: make(chan struct{})}
	c.sess = zlcmutex.Session{ID: s.srv.newSession(c), State: zlcmutex.StateConnected}
	s.clients = append(s.clients, c)
	return c
}

// Settle returns once every other goroutine of the bubble is durably blocked. The
// scheduler methods settle before they return; a caller that starts goroutines of its
// own (a recipe's Acquire, say) settles after starting them.
func (s *Sim) Settle() {
	if !s.realTime {
		synctest.Wait()
	}
}

// Requests returns the number of requests clients have sent so far.
func (s *Sim) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Session returns what c knows of its session.
func (s *Sim) Session(c *Client) zlcmutex.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.sess
}

// SessionAlive reports whether c's current (or last) session is alive on the servers.
func (s *Sim) SessionAlive(c *Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv.alive(c.sess.ID)
}

// Dead reports whether c crashed or was closed.
func (s *Sim) Dead(c *Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.dead
}

// Pending describes c's next pending request, or returns "" when there is none.
func (s *Sim) Pending(c *Client) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(c.pending) == 0 {
		return ""
	}
	return c.pending[0].String()
}

// CanRun reports whether c has a pending request and a connection to send it on.
func (s *Sim) CanRun(c *Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.canRun(c)
}

func (s *Sim) canRun(c *Client) bool {
	return !c.dead && len(c.pending) > 0 && c.sess.State == zlcmutex.StateConnected
}

// CanDeliver reports whether a fired watch event is waiting for c and can be
// delivered now: c is connected, or the event is EventNotWatching (which the client
// library makes up itself).
func (s *Sim) CanDeliver(c *Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.canDeliver(c)
}

func (s *Sim) canDeliver(c *Client) bool {
	return len(c.queue) > 0 &&
		(c.sess.State == zlcmutex.StateConnected || c.queue[0].ev.Type == zlcmutex.EventNotWatching)
}

// Node returns a node's stat and data, and whether it exists.
func (s *Sim) Node(path string) (Stat, []byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.srv.nodes[path]
	if !ok {
		return Stat{}, nil, false
	}
	return n.stat, append([]byte(nil), n.data...), true
}

// Children returns the names of a node's children (nil when it is missing): sorted,
// or in order of creation in a wire simulation (whose names may hold random GUIDs).
func (s *Sim) Children(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, _, _ := s.srv.children(path)
	if !s.srv.byCreation {
		slices.Sort(names)
	}
	return names
}

// Ephemerals returns the paths of every ephemeral node, sorted.
func (s *Sim) Ephemerals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for p, n := range s.srv.nodes {
		if n.stat.EphemeralOwner != 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Zxid returns the zxid of the last transaction.
func (s *Sim) Zxid() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv.zxid
}

// Run lets c's first pending request reach the servers and its reply come back.
// Watch events queued for c are delivered before the reply, as ZooKeeper sends a
// client its events before the replies to its later requests. It returns the request
// and its reply, for a trace.
func (s *Sim) Run(c *Client) (Trace, error) {
	return s.run(c, false)
}

// LoseReply lets c's first pending request be applied by the servers, then breaks
// c's connection before the reply arrives: the request fails with
// ErrConnectionLoss, c's other pending requests are dropped, and its session state
// becomes disconnected (the session lives on).
func (s *Sim) LoseReply(c *Client) (Trace, error) {
	return s.run(c, true)
}

func (s *Sim) run(c *Client, lose bool) (Trace, error) {
	s.mu.Lock()
	if !s.canRun(c) {
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s has no pending request it can send", c.name)
	}
	trace := s.runLocked(c, lose)
	s.mu.Unlock()
	s.Settle()
	return trace, nil
}

// runLocked takes c's first pending request to the servers, and its reply back or
// (lose) not. Under mu.
func (s *Sim) runLocked(c *Client, lose bool) Trace {
	r := c.pending[0]
	c.pending = c.pending[1:]
	rep := s.apply(c, r)
	trace := tracef("%v = %v", r, replyText{r, rep})
	switch {
	case lose && c.wire != nil:
		trace = tracef("%v applied (%v), reply lost", r, replyText{r, rep})
		c.wire.breakConn()
	case lose:
		trace = tracef("%v applied (%v), reply lost", r, replyText{r, rep})
		rep = reply{err: zlcmutex.ErrConnectionLoss}
		c.failPending(zlcmutex.ErrConnectionLoss)
		c.setSession(zlcmutex.Session{ID: c.sess.ID, State: zlcmutex.StateDisconnected})
		r.reply <- rep
	default:
		for s.canDeliver(c) {
			s.deliver(c)
		}
		c.answer(r, rep)
	}
	return trace
}

// apply performs r for c's session on the servers. Under mu.
func (s *Sim) apply(c *Client, r *request) reply {
	rep := s.applyRead(c, r)
	switch r.kind {
	case reqFixed:
		if r.wire.op == opCreateTTL || r.wire.op == opCreate || r.wire.op == opCreate2 {
			// A refused create (a TTL node) is an error transaction in ZooKeeper
			// too: it takes a zxid (found by TestWireMatchesZooKeeper).
			s.srv.zxid++
		}
	case reqCreate, reqDelete, reqSet, reqMulti, reqTxn:
		if rep.err != nil {
			// A write the servers refuse is logged as an error transaction: it
			// takes a zxid too.
			s.srv.zxid++
		}
	}
	return rep
}

// applyRead performs r; a write that fails has no effect. Under mu.
func (s *Sim) applyRead(c *Client, r *request) reply {
	sid := c.sess.ID
	switch r.kind {
	case reqCreate:
		p, err := s.srv.createNode(sid, r.path, r.data, r.flags, r.container)
		rep := reply{path: p, err: err}
		if err == nil {
			rep.stat = s.srv.nodes[p].stat
		}
		return rep
	case reqDelete:
		return reply{err: s.srv.delete(r.path, r.version)}
	case reqGet:
		data, st, err := s.srv.get(r.path)
		rep := reply{data: data, stat: st, err: err}
		if err == nil && r.watch {
			rep.ev = s.srv.addWatch(c, sid, r.path, dataWatch)
		}
		return rep
	case reqExists:
		_, st, err := s.srv.get(r.path)
		rep := reply{stat: st, exists: err == nil, err: err}
		if errors.Is(err, zlcmutex.ErrNoNode) {
			rep.err = nil
		}
		if rep.err == nil && r.watch {
			rep.ev = s.srv.addWatch(c, sid, r.path, dataWatch)
		}
		return rep
	case reqChildren:
		names, st, err := s.srv.children(r.path)
		rep := reply{children: names, stat: st, err: err}
		if err == nil && r.watch {
			rep.ev = s.srv.addWatch(c, sid, r.path, childWatch)
		}
		return rep
	case reqSet:
		st, err := s.srv.set(r.path, r.data, r.version)
		return reply{stat: st, err: err}
	case reqMulti:
		return reply{err: s.srv.multi(r.ops)}
	case reqSync:
		if !validPath(r.path) {
			return reply{err: errBadArguments}
		}
		return reply{}
	}
	if r.wire != nil {
		return s.applyWire(c, r)
	}
	return reply{err: errBadArguments}
}

// Drop breaks c's connection: its pending requests fail with ErrConnectionLoss
// without having reached the servers, and its session state becomes disconnected
// (the session lives on, with its watches).
func (s *Sim) Drop(c *Client) (Trace, error) {
	s.mu.Lock()
	if c.dead || c.sess.State != zlcmutex.StateConnected {
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s is not connected", c.name)
	}
	trace := tracef("connection lost")
	if len(c.pending) > 0 {
		trace = tracef("connection lost; %v dropped before it was applied", c.pending[0])
	}
	if c.wire != nil {
		c.wire.breakConn()
	} else {
		c.failPending(zlcmutex.ErrConnectionLoss)
		c.setSession(zlcmutex.Session{ID: c.sess.ID, State: zlcmutex.StateDisconnected})
	}
	s.mu.Unlock()
	s.Settle()
	return trace, nil
}

// Deliver hands c the oldest watch event fired for it.
func (s *Sim) Deliver(c *Client) (Trace, error) {
	s.mu.Lock()
	if !s.canDeliver(c) {
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("no watch event can be delivered to %s now", c.name)
	}
	trace := s.deliver(c)
	s.mu.Unlock()
	s.Settle()
	return trace, nil
}

// deliver sends c's oldest queued event. Under mu.
func (s *Sim) deliver(c *Client) Trace {
	d := c.queue[0]
	c.queue = c.queue[1:]
	if c.wire != nil {
		c.wire.send(watchEvent(int32(d.ev.Type), d.ev.Path))
		return tracef("watch event: %s %v", d.ev.Path, d.ev.Type)
	}
	d.ch <- d.ev // each watch channel has room for its one event
	return tracef("watch event: %s %v", d.ev.Path, d.ev.Type)
}

// Expire ends c's session on the servers: its ephemeral nodes are deleted and its
// watches dropped. A connected client hears of it at once (state expired, pending
// requests fail with ErrSessionExpired, its watches get EventNotWatching when
// delivered); a disconnected one when it reconnects. A crashed client's session can
// expire too, which is how its nodes go away.
func (s *Sim) Expire(c *Client) (Trace, error) {
	s.mu.Lock()
	sid := c.sess.ID
	if !s.srv.alive(sid) {
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s has no live session", c.name)
	}
	dropped := s.srv.closeSession(sid)
	deleted := fmt.Sprintf(" (zxid %d)", s.srv.zxid)
	trace := tracef("session 0x%x expired%s", uint64(sid), deleted)
	if !c.dead && c.wire != nil && c.sess.State == zlcmutex.StateConnected {
		// ZooKeeper closes the connection of a session it expires; the client
		// reconnects at once and hears that its session expired, all in this
		// step, as an in-process client hears at once.
		c.wire.breakConn()
		c.wire.permits <- struct{}{}
		s.mu.Unlock()
		s.Settle()
		return tracef("session 0x%x expired%s; %s", uint64(sid), deleted, strings.Join(s.TakeNotes(), "; ")), nil
	} else if !c.dead && c.wire == nil {
		c.dropped = append(c.dropped, dropped...)
		if c.sess.State == zlcmutex.StateConnected {
			c.learnExpired()
		} else {
			trace = tracef("session 0x%x expired%s; the client will hear of it when it reconnects", uint64(sid), deleted)
		}
	}
	s.mu.Unlock()
	s.Settle()
	return trace, nil
}

// Reconnect reconnects a disconnected client: with its session if that is alive,
// otherwise the client hears that its session expired. A client whose session
// expired gets a new session.
func (s *Sim) Reconnect(c *Client) (Trace, error) {
	s.mu.Lock()
	var trace Trace
	switch {
	case c.dead:
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s is dead", c.name)
	case c.wire != nil:
		s.mu.Unlock()
		return s.reconnectWire(c)
	case c.sess.State == zlcmutex.StateDisconnected && s.srv.alive(c.sess.ID):
		c.setSession(zlcmutex.Session{ID: c.sess.ID, State: zlcmutex.StateConnected})
		trace = tracef("reconnected with session 0x%x", uint64(c.sess.ID))
	case c.sess.State == zlcmutex.StateDisconnected:
		c.learnExpired()
		trace = tracef("reconnected: session 0x%x has expired", uint64(c.sess.ID))
	case c.sess.State == zlcmutex.StateExpired:
		c.setSession(zlcmutex.Session{ID: s.srv.newSession(c), State: zlcmutex.StateConnected})
		trace = tracef("new session 0x%x", uint64(c.sess.ID))
	default:
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s is connected", c.name)
	}
	s.mu.Unlock()
	s.Settle()
	return trace, nil
}

// Crash kills c's process: its pending requests fail with ErrClosed (so that the
// recipe's goroutines end; nobody is there to see them), its session state becomes
// closed, and every later call fails with ErrClosed. The session lives on on the
// servers, with its ephemeral nodes, until it expires.
func (s *Sim) Crash(c *Client) (Trace, error) {
	s.mu.Lock()
	if c.dead {
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s is dead already", c.name)
	}
	s.kill(c)
	s.mu.Unlock()
	s.Settle()
	return tracef("crashed; its session lives on until it expires"), nil
}

// Close closes c: its session ends on the servers (its ephemeral nodes are deleted),
// pending requests fail with ErrClosed and its session state becomes closed.
func (s *Sim) Close(c *Client) (Trace, error) {
	s.mu.Lock()
	if c.dead {
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s is dead already", c.name)
	}
	trace := tracef("closed")
	if s.srv.alive(c.sess.ID) {
		s.srv.closeSession(c.sess.ID)
		trace = tracef("closed session 0x%x", uint64(c.sess.ID))
	}
	s.kill(c)
	s.mu.Unlock()
	s.Settle()
	return trace, nil
}

// kill makes c dead. Under mu.
func (s *Sim) kill(c *Client) {
	if c.wire != nil && !c.dead {
		close(c.wire.dead)
		c.wire.breakConn()
	}
	c.dead = true
	c.failPending(zlcmutex.ErrClosed)
	c.queue, c.dropped = nil, nil
	c.setSession(zlcmutex.Session{ID: c.sess.ID, State: zlcmutex.StateClosed})
}

// Tick moves the bubble's clock by d: timers of the recipe that fall due fire, in
// order, each woken goroutine running until it blocks again.
func (s *Sim) Tick(d time.Duration) {
	time.Sleep(d)
	s.Settle()
}

// reconnectWire lets a wire client's library connect once: it dials, and the
// handshake decides (its session if that lives, expired if not, a new session if it
// asks for one).
func (s *Sim) reconnectWire(c *Client) (Trace, error) {
	s.mu.Lock()
	if c.sess.State == zlcmutex.StateConnected || c.wire.conn != nil {
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s is connected", c.name)
	}
	select {
	case c.wire.permits <- struct{}{}:
	default:
		s.mu.Unlock()
		return Trace{}, fmt.Errorf("%s may connect already", c.name)
	}
	s.mu.Unlock()
	s.Settle()
	notes := s.TakeNotes()
	if len(notes) == 0 {
		return tracef("may reconnect; it has not tried yet"), nil
	}
	return tracef("%s", strings.Join(notes, "; ")), nil
}

// CanReconnect reports whether c is cut off and may be let reconnect: it is
// disconnected or has heard its session expired, and (a wire client) its library is
// not connected or about to be.
func (s *Sim) CanReconnect(c *Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := c.sess.State
	if c.dead || st != zlcmutex.StateDisconnected && st != zlcmutex.StateExpired {
		return false
	}
	return c.wire == nil || c.wire.conn == nil && len(c.wire.permits) == 0
}
