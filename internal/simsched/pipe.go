package simsched

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
)

// ServerEnd is the server's end of one connection: the connection, and the queue
// of what its writer (Write) writes to it, in order. Send, Close and Closed are
// called under the simulator's lock.
type ServerEnd struct {
	// Conn is the connection, which the server reads.
	Conn   net.Conn
	out    chan []byte
	closed bool
}

// NewServerEnd returns conn's server end, whose queue holds queue packets; its
// writer, Write, is for the caller to start.
func NewServerEnd(conn net.Conn, queue int) *ServerEnd {
	return &ServerEnd{Conn: conn, out: make(chan []byte, queue)}
}

// Pipe makes a connection inside the bubble (net.Pipe, whose reads and writes
// block durably): the client's end, which writes as a TCP socket does
// (ClientEnd), and the server's end, whose writer it starts.
func Pipe(queue int) (client net.Conn, server *ServerEnd) {
	cli, srv := net.Pipe()
	server = NewServerEnd(srv, queue)
	go server.Write()
	return &ClientEnd{Conn: cli}, server
}

// Send queues b, unless the end is closed.
func (e *ServerEnd) Send(b []byte) {
	if !e.closed {
		e.out <- b
	}
}

// Close stops queueing: the writer closes the connection once it has written
// what was queued before.
func (e *ServerEnd) Close() {
	if !e.closed {
		e.closed = true
		e.out <- nil
	}
}

// Closed reports whether Close was called.
func (e *ServerEnd) Closed() bool { return e.closed }

// Write writes the queued packets in order, and closes the connection after the
// last; once a write failed (the client closed its end), it drops the rest.
func (e *ServerEnd) Write() {
	defer e.Conn.Close()
	failed := false
	for b := range e.out {
		if b == nil {
			return
		}
		if !failed {
			_, err := e.Conn.Write(b)
			failed = err != nil
		}
	}
}

// ClientEnd is the client's end of a pipe, made to write as a TCP socket does:
// once the server closed the connection, a write still succeeds (the bytes are
// lost; the client finds out when it reads), where a bare pipe would fail it. A
// library's error path for a failed write may differ from the one real sockets
// take: go-zookeeper's answers a request twice, and then blocks.
type ClientEnd struct {
	net.Conn
	// closed, set by Close from the client's side only; atomic, as a library may
	// close from one goroutine while another writes.
	closed atomic.Bool
}

var _ net.Conn = (*ClientEnd)(nil)

// Write implements net.Conn.
func (c *ClientEnd) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if errors.Is(err, io.ErrClosedPipe) && !c.closed.Load() {
		return len(b), nil
	}
	return n, err
}

// Close implements net.Conn.
func (c *ClientEnd) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}
