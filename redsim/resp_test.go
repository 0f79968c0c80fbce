package redsim

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"testing/synctest"
)

// TestReadCommand: RESP arrays and inline commands are read; malformed frames are
// protocol errors, as Redis words them, and allocate nothing large.
func TestReadCommand(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "GET k", ""},
		{"PING hello\r\n", "PING hello", ""},
		{"*0\r\n", "", ""},
		{"*abc\r\n", "", "ERR Protocol error: invalid multibulk length"},
		{"*99999999\r\n", "", "ERR Protocol error: invalid multibulk length"},
		{"*1\r\nGET\r\n", "", "ERR Protocol error: expected '$', got 'G'"},
		{"*1\r\n$-5\r\n", "", "ERR Protocol error: invalid bulk length"},
		{"*1\r\n$999999999999\r\n", "", "ERR Protocol error: invalid bulk length"},
		{"*1\r\n$3\r\nGETXX\r\n", "", "ERR Protocol error: invalid bulk length"},
		{"*1\r\n$3\r\nGE", "", "unexpected EOF"},
	} {
		args, err := readCommand(bufio.NewReader(strings.NewReader(c.in)))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err || (err == nil && strings.Join(args, " ") != c.want) {
			t.Errorf("%q: %q, %v; want %q, %q", c.in, args, err, c.want, c.err)
		}
	}
}

// TestMalformedFrameClosesConnection: the simulator answers a malformed frame with
// Redis's protocol error and closes the connection, as Redis does; an inline
// command waits for the scheduler like any other.
func TestMalformedFrameClosesConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		c := s.NewClient("c0")
		conn, err := c.dial(Addr(0))
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		go func() { _, _ = conn.Write([]byte("PING\r\n")) }()
		s.Settle()
		if what, err := s.Serve(c, Reply); err != nil || what != "i0 PING → PONG" {
			t.Fatalf("serving an inline PING: %q, %v", what, err)
		}
		if line, _ := br.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("inline PING: %q", line)
		}
		go func() { _, _ = conn.Write([]byte("*1\r\n$x\r\n")) }()
		s.Settle()
		if line, _ := br.ReadString('\n'); line != "-ERR Protocol error: invalid bulk length\r\n" {
			t.Fatalf("a malformed frame: %q", line)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("after a protocol error: %v, want EOF", err)
		}
		if notes := s.TakeNotes(); len(notes) != 1 {
			t.Errorf("notes %q, want the protocol error's", notes)
		}
		conn.Close()
		s.Shutdown()
	})
}

// TestScheduleRoundTrip: a schedule renders as ParseSchedule reads it; bad lines
// are errors.
func TestScheduleRoundTrip(t *testing.T) {
	const text = "clients 3\ninstances 3\nacquire c0\nstep c1\ntick 250ms\njump i2 1s\nrestart i1\ndelay c2\nlose-reply c0\ndrop c1\ncrash c2\nrelease c0\ntimeout c1\nrun c2\n"
	s, err := ParseSchedule(text)
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != text {
		t.Errorf("round trip:\n%s\nwant\n%s", s, text)
	}
	for _, bad := range []string{"", "acquire c0", "clients 2\nacquire c2", "clients 2\njump i1 1s", "clients 1\ntick", "clients 1\ntick -1s",
		"clients 1\nacquire i0", "clients 1\nfly c0", "clients 1\njump i0", "clients 99", "clients 1\nacquire c01"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
