package redsim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
)

// Sim is a set of independent simulated Redis instances and their clients, and the
// scheduler that decides what becomes of every request: applied with its reply sent,
// applied with its reply lost, dropped, or applied with its reply held past the next
// tick; when the clock moves; when an instance's clock jumps or it restarts.
//
// A Sim lives inside a testing/synctest bubble: its scheduler methods are called
// from the bubble's root goroutine and return only once every other goroutine of the
// bubble is durably blocked again (synctest.Wait), so a run is a function of the
// sequence of scheduler calls. Only Tick moves the clock.
type Sim struct {
	mu       sync.Mutex
	insts    []*Instance
	clients  []*Client
	requests int
	notes    simsched.Notes
}

// New returns a Sim of n empty instances (n >= 1), addressed Addr(0)...Addr(n-1).
func New(n int) *Sim {
	s := &Sim{}
	for i := range max(n, 1) {
		s.insts = append(s.insts, newInstance(Addr(i)))
	}
	return s
}

// Addr is the address of instance i: what a client dials through the Sim's
// dialer. It is a loopback address nothing listens on (127.0.83.1:6379 for
// instance 0), so that a client that dials it without the simulator's dialer fails
// at once, and no name needs resolving: go-redis's maintenance notifications
// (on by default) look a host name up to classify it, and a lookup inside a bubble
// leaves the net package's resolver bound to that bubble, which crashes the next.
func Addr(i int) string { return "127.0.83." + strconv.Itoa(i+1) + ":6379" }

// instanceOf returns the instance an address names, or -1.
func (s *Sim) instanceOf(addr string) int {
	for i := range s.insts {
		if Addr(i) == addr {
			return i
		}
	}
	return -1
}

// Instances returns the number of instances.
func (s *Sim) Instances() int { return len(s.insts) }

// Keys returns instance i's live keys (of database 0).
func (s *Sim) Keys(i int) []KeyInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insts[i].Keys()
}

// Key returns key on instance i (database 0), if it lives.
func (s *Sim) Key(i int, key string) (KeyInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.insts[i]
	e := in.lookup(0, key)
	if e == nil {
		return KeyInfo{}, false
	}
	ttl := time.Duration(-1)
	if e.expireAt != 0 {
		ttl = time.Duration(e.expireAt-in.nowMs()) * time.Millisecond
	}
	return KeyInfo{Key: key, Value: e.val, TTL: ttl, at: e.expireAt}, true
}

// Client is one simulated process: every connection its code dials through
// Dialer, to any instance, is its.
type Client struct {
	sim  *Sim
	name string
	// conns are its connections, in the order they were dialled.
	conns []*conn
	// dials counts its connections per instance.
	dials map[int]int
	dead  bool
}

// conn is one connection: the server's end of a pipe, the queue of replies its
// writer writes, the requests read and not yet served, and the session the
// instance numbers when it serves the first of them (so that CLIENT ID follows the
// schedule, not the order in which goroutines dialled).
type conn struct {
	c    *Client
	inst int
	seq  int
	// end is the server's end of the pipe; its queue is used under sim.mu.
	end *simsched.ServerEnd
	// Under sim.mu.
	sess    *session
	epoch   int
	pending [][]string
	// broken: the server closed it; gone: the client closed it.
	broken, gone bool
	// delayed holds replies until the next tick.
	delayed [][]byte
}

// NewClient returns a new process named name.
func (s *Sim) NewClient(name string) *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Client{sim: s, name: name, dials: map[int]int{}}
	s.clients = append(s.clients, c)
	return c
}

// errDead is what the dialer answers a crashed process.
var errDead = errors.New("redsim: the process has crashed")

// Dialer returns c's dialer, of go-redis's Options.Dialer kind: a net.Pipe made in
// the bubble, to the instance addr names.
func (c *Client) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(_ context.Context, _, addr string) (net.Conn, error) { return c.dial(addr) }
}

func (c *Client) dial(addr string) (net.Conn, error) {
	s := c.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.instanceOf(addr)
	switch {
	case c.dead:
		return nil, errDead
	case i < 0:
		return nil, fmt.Errorf("redsim: no instance at %s (want one of %s...)", addr, Addr(0))
	}
	cli, end := simsched.Pipe(connQueue)
	cn := &conn{c: c, inst: i, seq: c.dials[i], end: end}
	c.dials[i]++
	c.conns = append(c.conns, cn)
	go s.serve(cn)
	return cli, nil
}

// connQueue bounds the replies queued on one connection.
const connQueue = 64

// serve reads cn's requests and queues them for the scheduler; a malformed frame
// is answered with a protocol error and closes the connection, as Redis does.
func (s *Sim) serve(cn *conn) {
	br := bufio.NewReader(cn.end.Conn)
	for {
		args, err := readCommand(br)
		s.mu.Lock()
		switch {
		case err != nil && isProtocolError(err):
			cn.end.Send(reply{kind: errorReply, str: err.Error()}.write(nil, 2))
			s.note("%s: %v; connection closed", cn, err)
			cn.breakConn()
		case err != nil:
			// The client closed it: what it sent before is still served.
			cn.gone = true
			if len(cn.pending) == 0 {
				cn.breakConn()
			}
		case len(args) > 0:
			cn.pending = append(cn.pending, args)
			s.requests++
		}
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (cn *conn) String() string {
	return fmt.Sprintf("%s→i%d#%d", cn.c.name, cn.inst, cn.seq)
}

// breakConn closes cn from the server's side: queued replies are still written,
// then the pipe closes; its unserved requests are gone. Under mu.
func (cn *conn) breakConn() {
	cn.broken = true
	cn.pending = nil
	cn.delayed = nil
	cn.end.Close()
}

// note adds a line to what happened on the Sim's own since the last TakeNotes.
func (s *Sim) note(format string, args ...any) {
	s.notes.Add(format, args...)
}

// TakeNotes returns, and forgets, what happened on the Sim's own since the last
// call (protocol errors).
func (s *Sim) TakeNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notes.Take()
}

// Settle returns once every other goroutine of the bubble is durably blocked.
func (s *Sim) Settle() { synctest.Wait() }

// Requests returns the number of requests clients have sent so far.
func (s *Sim) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// next returns c's next request's connection: the first, by instance then by
// dial order, with a request waiting; nil when none. Under mu.
func (c *Client) next() *conn {
	var best *conn
	for _, cn := range c.conns {
		if len(cn.pending) > 0 && (best == nil || cn.inst < best.inst) {
			best = cn
		}
	}
	return best
}

// CanRun reports whether c has a request waiting.
func (s *Sim) CanRun(c *Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.next() != nil
}

// Fate is what becomes of a request a step serves.
type Fate int

// The fates of a request.
const (
	// Reply: applied, its reply sent.
	Reply Fate = iota
	// LoseReply: applied, then the connection breaks.
	LoseReply
	// Drop: the connection breaks before it is applied.
	Drop
	// Delay: applied, its reply held until the next tick has moved the clock.
	Delay
)

// Serve decides the fate of c's next request and settles; the trace tells the
// request and its reply.
func (s *Sim) Serve(c *Client, f Fate) (string, error) {
	s.mu.Lock()
	cn := c.next()
	if cn == nil {
		s.mu.Unlock()
		return "", fmt.Errorf("%s has no request waiting", c.name)
	}
	args := cn.pending[0]
	cn.pending = cn.pending[1:]
	what := fmt.Sprintf("i%d %s", cn.inst, quoteArgs(args))
	if f == Drop {
		cn.breakConn()
		what += ": dropped, connection broken"
	} else {
		in := s.insts[cn.inst]
		if cn.sess == nil || cn.epoch != in.epoch() {
			cn.sess, cn.epoch = in.newSession(), in.epoch()
		}
		r := in.exec(cn.sess, args)
		b := r.write(nil, cn.sess.proto)
		what += " → " + r.String()
		switch f {
		case LoseReply:
			cn.breakConn()
			what += " (reply lost, connection broken)"
		case Delay:
			cn.delayed = append(cn.delayed, b)
			what += " (reply held past the next tick)"
		default:
			cn.end.Send(b)
		}
	}
	if cn.gone && len(cn.pending) == 0 {
		cn.breakConn()
	}
	s.mu.Unlock()
	s.Settle()
	return what, nil
}

// quoteArgs renders a request for a trace.
func quoteArgs(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \n\r\t\"") || len(a) > 64 {
			a = strconv.Quote(clip(a, 64))
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// Tick moves the clock by d (timers fire, keys expire), then sends the replies held
// by Delay, and settles.
func (s *Sim) Tick(d time.Duration) {
	time.Sleep(d)
	s.mu.Lock()
	for _, c := range s.clients {
		for _, cn := range c.conns {
			for _, b := range cn.delayed {
				cn.end.Send(b)
			}
			cn.delayed = nil
		}
	}
	s.mu.Unlock()
	s.Settle()
}

// Jump moves instance i's clock forward by d: keys whose time has come expire.
func (s *Sim) Jump(i int, d time.Duration) {
	s.mu.Lock()
	s.insts[i].offset += d
	s.mu.Unlock()
	s.Settle()
}

// Restart restarts instance i without persistence: its keys and scripts are lost,
// every connection to it breaks, and CLIENT IDs start again from 1.
func (s *Sim) Restart(i int) {
	s.mu.Lock()
	s.insts[i].restart()
	for _, c := range s.clients {
		for _, cn := range c.conns {
			if cn.inst == i {
				cn.breakConn()
			}
		}
	}
	s.mu.Unlock()
	s.Settle()
}

// Crash kills c: its connections break, and it cannot dial again. Its goroutines
// live on, cut off.
func (s *Sim) Crash(c *Client) {
	s.mu.Lock()
	c.dead = true
	for _, cn := range c.conns {
		cn.breakConn()
	}
	s.mu.Unlock()
	s.Settle()
}

// Dead reports whether c has crashed.
func (s *Sim) Dead(c *Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.dead
}

// Shutdown breaks every connection, so that the goroutines serving them end.
func (s *Sim) Shutdown() {
	s.mu.Lock()
	for _, c := range s.clients {
		c.dead = true
		for _, cn := range c.conns {
			cn.breakConn()
		}
	}
	s.mu.Unlock()
	s.Settle()
}
