package zksim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// ServerConfig says what a Server listens on and which faults it injects. Each rate
// is a probability per request, drawn from a random source seeded with Seed; the
// faults are real-time and the clients' own threads race, so a seed does not replay
// a run (only the in-bubble mode does).
type ServerConfig struct {
	// Listen is the address to listen on, host:port ("127.0.0.1:0": a free port).
	Listen string
	// Seed seeds the fault draws.
	Seed uint64
	// LoseReply applies a request, then closes its connection before the reply.
	LoseReply float64
	// Drop closes a request's connection before the request is applied.
	Drop float64
	// Stall stops answering a request's connection, pings included, until the client
	// gives up on it (after two thirds of its session timeout); the request is never
	// applied.
	Stall float64
	// ExpireStalled, for a stall, also expires the connection's session at once: the
	// client is not told until it reconnects, and meanwhile believes it holds what
	// its session held (what only fencing protects against).
	ExpireStalled float64
}

// Validate reports a rate outside [0, 1] or missing listen address.
func (c ServerConfig) Validate() error {
	if c.Listen == "" {
		return errors.New("zksim server: no listen address")
	}
	for name, r := range map[string]float64{"lose-reply": c.LoseReply, "drop": c.Drop, "stall": c.Stall, "expire-stalled": c.ExpireStalled} {
		if r < 0 || r > 1 {
			return fmt.Errorf("zksim server: %s rate %v is not in [0, 1]", name, r)
		}
	}
	return nil
}

// serveState is a Server's fault plan, its random source, and what it counted.
type serveState struct {
	cfg ServerConfig
	rng *rand.Rand
	// Faults counts the faults injected, by name.
	faults map[string]int
	// lostAt is when each session's last connection broke (for the session timeout).
	lostAt map[int64]time.Time
}

// Server is the wire simulation behind a TCP listener, for clients that cannot run in
// a bubble (Curator, Kazoo, any ZooKeeper client): one linearizable tree, sessions
// that expire when their client stays away for their timeout, and the faults of its
// ServerConfig, injected as requests come. It is not deterministic.
type Server struct {
	sim  *Sim
	ln   net.Listener
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// StartServer listens on cfg.Listen and serves until Close.
func StartServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("zksim server: %w", err)
	}
	sim := NewWire()
	sim.realTime = true
	sim.tcp = &serveState{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x7a6b)), faults: map[string]int{}, lostAt: map[int64]time.Time{}}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{sim: sim, ln: ln, stop: stop}
	s.wg.Add(2)
	go s.accept()
	go s.reap(ctx)
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Faults returns how many faults of each kind the server injected so far.
func (s *Server) Faults() map[string]int {
	s.sim.mu.Lock()
	defer s.sim.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.sim.tcp.faults {
		out[k] = v
	}
	return out
}

// Close stops listening, closes every connection and waits for the server's
// goroutines.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.stop()
	s.sim.mu.Lock()
	for _, c := range s.sim.clients {
		if c.wire.conn != nil {
			c.wire.breakConn()
		}
	}
	s.sim.mu.Unlock()
	s.wg.Wait()
	return err
}

// accept serves each connection as a client of its own: ZooKeeper keeps watches per
// connection; a session moves with its client from one connection to the next.
func (s *Server) accept() {
	defer s.wg.Done()
	for n := 0; ; n++ {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		sim := s.sim
		sim.mu.Lock()
		c := &Client{sim: sim, name: "conn" + strconv.Itoa(n), changed: make(chan struct{})}
		c.sess = zlcmutex.Session{State: zlcmutex.StateDisconnected}
		c.wire = &wireEnd{c: c, permits: make(chan struct{}, 1), dead: make(chan struct{})}
		sim.clients = append(sim.clients, c)
		wc := simsched.NewServerEnd(conn, wireQueue)
		c.wire.conn = wc
		sim.mu.Unlock()
		s.wg.Add(2)
		go func() { defer s.wg.Done(); wc.Write() }()
		go func() { defer s.wg.Done(); sim.serve(c.wire, wc) }()
	}
}

// reap expires the sessions whose client has been away for their timeout, as
// ZooKeeper's session tracker does.
func (s *Server) reap(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			sim := s.sim
			sim.mu.Lock()
			for sid, at := range sim.tcp.lostAt {
				sess := sim.srv.sessions[sid]
				if sess == nil || !sess.alive {
					delete(sim.tcp.lostAt, sid)
					continue
				}
				if now.Sub(at) >= time.Duration(sess.timeout)*time.Millisecond {
					sim.srv.closeSession(sid)
					delete(sim.tcp.lostAt, sid)
					sim.deliverAll()
				}
			}
			sim.mu.Unlock()
		}
	}
}

// drive decides at once what becomes of c's pending requests, by the fault rates.
// Under mu.
func (s *Sim) drive(c *Client) {
	t := s.tcp
	for len(c.pending) > 0 && c.wire.conn != nil && !c.wire.stalled && !c.dead {
		p := t.rng.Float64()
		cfg := t.cfg
		switch {
		case p < cfg.LoseReply:
			t.faults["lose-reply"]++
			s.runLocked(c, true)
		case p < cfg.LoseReply+cfg.Drop:
			t.faults["drop"]++
			c.wire.breakConn()
		case p < cfg.LoseReply+cfg.Drop+cfg.Stall:
			s.stall(c)
		default:
			s.runLocked(c, false)
		}
		s.deliverAll()
	}
}

// faultPing draws a fault for a ping, as for a request: a lost reply or a drop breaks
// the connection, a stall silences it (and may expire its session). Under mu.
func (s *Sim) faultPing(c *Client) {
	t, cfg := s.tcp, s.tcp.cfg
	switch p := t.rng.Float64(); {
	case p < cfg.LoseReply+cfg.Drop:
		t.faults["drop"]++
		c.wire.breakConn()
	case p < cfg.LoseReply+cfg.Drop+cfg.Stall:
		s.stall(c)
	}
}

// stall silences c's connection and, by the ExpireStalled rate, expires its session
// at once. Under mu.
func (s *Sim) stall(c *Client) {
	t := s.tcp
	t.faults["stall"]++
	c.wire.stalled = true
	if t.rng.Float64() < t.cfg.ExpireStalled && s.srv.alive(c.sess.ID) {
		t.faults["expire-stalled"]++
		s.srv.closeSession(c.sess.ID)
		s.deliverAll()
	}
}

// deliverAll writes every connected client's queued watch events. Under mu.
func (s *Sim) deliverAll() {
	for _, o := range s.clients {
		for s.canDeliver(o) {
			s.deliver(o)
		}
	}
}
