package zksim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// WireAddress is the one server address a wire client is given; the simulator's
// dialer answers it whatever it is.
const WireAddress = "zksim:2181"

// Session timeouts a wire client may negotiate: ZooKeeper's defaults, 2 and 20
// ticks of 2 s.
const (
	minSessionTimeoutMs = 4000
	maxSessionTimeoutMs = 40000
)

// wireEnd is the servers' side of one wire client: a process whose ZooKeeper client
// library (go-zookeeper) talks to the simulator over net.Pipe connections the
// simulator's dialer makes. The scheduler decides when the library may connect (the
// gate its host provider waits at), and what becomes of every request it sends.
type wireEnd struct {
	c *Client
	// permits lets the library's next connection attempt through: the scheduler's
	// reconnect step, or the first connection.
	permits chan struct{}
	// dead is closed when the process crashed or was closed: the host provider then
	// says every server was tried, and the dialer refuses.
	dead chan struct{}
	// Under sim.mu.
	conn *simsched.ServerEnd
	// stalled: the servers read the client's packets but answer none, pings
	// included.
	stalled bool
}

// wireQueue bounds the packets queued on one connection; a client library reads
// all the time, so the queue never holds more than a step's replies and events.
const wireQueue = 256

// send queues a packet on the current connection, if any. Under sim.mu.
func (e *wireEnd) send(pkt []byte) {
	if e.conn != nil {
		e.conn.Send(pkt)
	}
}

// breakConn breaks the current connection from the servers' side: what was
// queued is still written, then the pipe closes; the connection's watches and
// undelivered events are gone (the client sets its watches again when it
// reconnects), its unanswered requests are never answered, and the client is
// disconnected. Under sim.mu.
func (e *wireEnd) breakConn() {
	if e.conn == nil {
		return
	}
	e.conn.Close()
	e.conn = nil
	c := e.c
	if t := c.sim.tcp; t != nil && c.sim.srv.alive(c.sess.ID) && c.sim.srv.sessions[c.sess.ID].client == c {
		t.lostAt[c.sess.ID] = time.Now() // its session times out unless it returns
	}
	c.sim.srv.dropWatches(c)
	c.queue, c.pending = nil, nil
	e.stalled = false
	if c.sess.State == zlcmutex.StateConnected {
		c.setSession(zlcmutex.Session{ID: c.sess.ID, State: zlcmutex.StateDisconnected})
	}
}

// hostProvider is a wire client's zk.HostProvider: one server, reached only when
// the scheduler lets the client connect. go-zookeeper's reconnection would
// otherwise race the recipe's own retries, and runs would not replay exactly.
type hostProvider struct{ e *wireEnd }

var _ zk.HostProvider = hostProvider{}

// Init implements zk.HostProvider.
func (hostProvider) Init([]string) error { return nil }

// Len implements zk.HostProvider.
func (hostProvider) Len() int { return 1 }

// Next implements zk.HostProvider: it waits for the scheduler's permit. For a dead
// process it returns at once, saying every server was tried (go-zookeeper then
// pauses a second and checks whether it was closed).
func (h hostProvider) Next() (string, bool) {
	select {
	case <-h.e.permits:
		return WireAddress, false
	case <-h.e.dead:
		return WireAddress, true
	}
}

// Connected implements zk.HostProvider.
func (hostProvider) Connected() {}

// errDead is what the dialer answers a dead process.
var errDead = errors.New("zksim: the process is dead")

// dial is a wire client's zk.Dialer: a net.Pipe made in the bubble (so that its
// reads and writes block durably), whose other end the simulator serves.
func (e *wireEnd) dial(_, _ string, _ time.Duration) (net.Conn, error) {
	s := e.c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.c.dead {
		return nil, errDead
	}
	if e.conn != nil {
		// A second connection while one is open: the recipe opened a second
		// zk.Conn on one process's options.
		s.wireNote("%s: a second connection while one is open (one zk.Conn per process)", e.c.name)
		return nil, errors.New("zksim: one zk.Conn per process")
	}
	cli, wc := simsched.Pipe(wireQueue)
	e.conn = wc
	go s.serve(e, wc)
	return cli, nil
}

// readPacket reads one length-prefixed packet.
func readPacket(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > wireMaxPacket {
		return nil, fmt.Errorf("packet of %d bytes", size)
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}

// serve reads wc's packets: the handshake, then requests (queued for the
// scheduler), pings (answered at once unless the servers stall) and close.
func (s *Sim) serve(e *wireEnd, wc *simsched.ServerEnd) {
	pkt, err := readPacket(wc.Conn)
	if err == nil {
		var req connectRequest
		if req, err = decodeConnect(pkt); err == nil {
			s.mu.Lock()
			s.handshake(e, wc, req)
			s.mu.Unlock()
		}
	}
	for err == nil {
		if pkt, err = readPacket(wc.Conn); err == nil {
			s.mu.Lock()
			s.received(e, wc, pkt)
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	if e.conn == wc {
		s.wireNote("%s: connection closed by the client (%v)", e.c.name, err)
		e.breakConn()
	}
	wc.Close()
	s.mu.Unlock()
}

// handshake answers a connect request: with the session the client names if it
// lives, a new session if it names none, or all zeros (expired) and the end of
// the connection. Under mu.
func (s *Sim) handshake(e *wireEnd, wc *simsched.ServerEnd, req connectRequest) {
	c := e.c
	if e.conn != wc || c.dead {
		wc.Close()
		return
	}
	timeout := min(max(req.timeout, minSessionTimeoutMs), maxSessionTimeoutMs)
	switch {
	case req.sessionID == 0:
		c.setSession(zlcmutex.Session{ID: s.srv.newSession(c), State: zlcmutex.StateConnected})
		s.srv.sessions[c.sess.ID].timeout = timeout
		s.wireNote("%s: connected, new session 0x%x (timeout %d ms)", c.name, uint64(c.sess.ID), timeout)
	case s.srv.alive(req.sessionID):
		sess := s.srv.sessions[req.sessionID]
		if old := sess.client; old != c && old.wire != nil && old.wire.conn != nil {
			// The session moves to this connection; ZooKeeper closes the old one.
			old.wire.breakConn()
		}
		sess.client = c
		c.setSession(zlcmutex.Session{ID: req.sessionID, State: zlcmutex.StateConnected})
		s.wireNote("%s: connected with session 0x%x", c.name, uint64(req.sessionID))
	default:
		wc.Send(connectResponse(0, 0, make([]byte, 16), req.readOnly))
		c.setSession(zlcmutex.Session{ID: req.sessionID, State: zlcmutex.StateExpired})
		s.wireNote("%s: told session 0x%x has expired", c.name, uint64(req.sessionID))
		e.conn = nil
		wc.Close()
		return
	}
	if s.tcp != nil {
		delete(s.tcp.lostAt, c.sess.ID)
	}
	wc.Send(connectResponse(s.srv.sessions[c.sess.ID].timeout, c.sess.ID, sessionPasswd(c.sess.ID), req.readOnly))
}

// sessionPasswd is a session's password: any 16 bytes, the same in every replay.
func sessionPasswd(sid int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(sid)), ^uint64(sid))
}

// received takes a packet of an established connection. Under mu.
func (s *Sim) received(e *wireEnd, wc *simsched.ServerEnd, pkt []byte) {
	if e.conn != wc {
		return // a connection the servers broke; the client has not noticed yet
	}
	in := juteReader{b: pkt}
	xid, op := in.int32(), in.int32()
	switch {
	case in.err != nil:
		s.wireNote("%s: a packet of %d bytes has no header; connection closed", e.c.name, len(pkt))
		e.breakConn()
	case op == opPing:
		if s.realTime && !e.stalled {
			s.faultPing(e.c) // a holder sends only pings: faults must reach it too
		}
		if e.conn == wc && !e.stalled {
			wc.Send(replyHeader(xidPing, s.srv.zxid, codeOK).packet())
		}
	case op == opClose:
		c := e.c
		if s.srv.alive(c.sess.ID) {
			s.srv.closeSession(c.sess.ID)
		}
		s.wireNote("%s: closed its session 0x%x", c.name, uint64(c.sess.ID))
		wc.Send(replyHeader(xid, s.srv.zxid, codeOK).packet())
		s.kill(c)
	default:
		r := decodeRequest(xid, op, in.b)
		if r.kind == reqSetWatches && !s.realTime {
			// go-zookeeper sends a reconnected session's watches from a goroutine of
			// its own (conn.go's sendSetWatches), racing the requests its client
			// queued while disconnected: which the socket carries first is the Go
			// scheduler's choice, and a replay took the other one (CI, 2026-11-30).
			// Both are pending by the next step; the servers take the watches first,
			// one of the orders the library can send, the same in every replay.
			e.c.pending = append([]*request{r}, e.c.pending...)
		} else {
			e.c.pending = append(e.c.pending, r)
		}
		s.requests++
		if s.realTime {
			s.drive(e.c)
		}
	}
}

// wireNote adds a line to what the wire did on its own since the last step (a
// handshake, a connection the client closed, a close); the lock property puts them
// in its trace. Under mu.
func (s *Sim) wireNote(format string, args ...any) {
	s.notes.Add(format, args...)
}

// TakeNotes returns, and forgets, what the wire did on its own since the last call.
func (s *Sim) TakeNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notes.Take()
}

// wireMaxPacket bounds a packet either way: a lock recipe's are far smaller.
const wireMaxPacket = 64 << 10

// ZKOption returns the one go-zookeeper option that makes a zk.Conn a wire client's:
// the simulator's dialer and host provider, and logger for the library's own log
// lines (nil discards them). Pass it to zk.Connect, called inside the bubble, with
// the address WireAddress. It panics for a client NewWireClient did not make.
func (c *Client) ZKOption(logger zk.Logger) func(*zk.Conn) {
	if c.wire == nil {
		panic("zksim: ZKOption of an in-process client")
	}
	if logger == nil {
		logger = discardLogger{}
	}
	e := c.wire
	return func(conn *zk.Conn) {
		zk.WithDialer(e.dial)(conn)
		zk.WithHostProvider(hostProvider{e})(conn)
		zk.WithLogger(logger)(conn)
		// The simulator's packets are small; go-zookeeper's default receive buffer
		// (1.5 MiB, made at every connection) would be most of a run's cost.
		zk.WithMaxBufferSize(wireMaxPacket)(conn)
	}
}

// discardLogger is a zk.Logger that logs nothing.
type discardLogger struct{}

// Printf implements zk.Logger.
func (discardLogger) Printf(string, ...any) {}
