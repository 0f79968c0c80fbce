package nemesis

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestConnectRequestEncoding(t *testing.T) {
	req := connectRequest{TimeOut: 4000, SessionID: 0x0123456789abcdef, Passwd: []byte{0xde, 0xad}}
	want := []byte{
		0x00, 0x00, 0x00, 0x1f, // frame length: 4+8+4+8+(4+2)+1 = 31
		0x00, 0x00, 0x00, 0x00, // protocolVersion 0
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // lastZxidSeen 0
		0x00, 0x00, 0x0f, 0xa0, // timeOut 4000 ms
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, // sessionId
		0x00, 0x00, 0x00, 0x02, 0xde, 0xad, // passwd: length 2, bytes
		0x00, // readOnly false
	}
	if got := req.encode(); !bytes.Equal(got, want) {
		t.Fatalf("connect request\n got % x\nwant % x", got, want)
	}
}

func TestCloseSessionEncoding(t *testing.T) {
	want := []byte{
		0x00, 0x00, 0x00, 0x08, // frame length
		0x00, 0x00, 0x00, 0x01, // xid 1
		0xff, 0xff, 0xff, 0xf5, // type -11 (closeSession)
	}
	if got := closeSessionRequest(1); !bytes.Equal(got, want) {
		t.Fatalf("closeSession\n got % x\nwant % x", got, want)
	}
}

func TestConnectResponseDecoding(t *testing.T) {
	body := []byte{
		0x00, 0x00, 0x00, 0x00, // protocolVersion
		0x00, 0x00, 0x0f, 0xa0, // timeOut 4000
		0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // sessionId
		0x00, 0x00, 0x00, 0x03, 0x01, 0x02, 0x03, // passwd
	}
	for _, tc := range []struct {
		name     string
		body     []byte
		readOnly bool
	}{
		{"without readOnly", body, false},
		{"with readOnly", append(append([]byte(nil), body...), 1), true},
	} {
		r, err := decodeConnectResponse(tc.body)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.TimeOut != 4000 || r.SessionID != 0x010000000000002a || !bytes.Equal(r.Passwd, []byte{1, 2, 3}) || r.ReadOnly != tc.readOnly {
			t.Fatalf("%s: decoded %+v", tc.name, r)
		}
	}
	if _, err := decodeConnectResponse(body[:10]); err == nil {
		t.Fatal("short response decoded")
	}
	bad := append([]byte(nil), body...)
	bad[19] = 0x40 // password longer than the frame
	if _, err := decodeConnectResponse(bad); err == nil {
		t.Fatal("overlong password decoded")
	}
}

func TestReplyHeaderDecoding(t *testing.T) {
	b := []byte{
		0x00, 0x00, 0x00, 0x01, // xid
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, // zxid
		0xff, 0xff, 0xff, 0x90, // err -112
	}
	h, err := decodeReplyHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h != (replyHeader{Xid: 1, Zxid: 0x100000007, Err: -112}) {
		t.Fatalf("decoded %+v", h)
	}
}

func TestParseSessionAndPasswd(t *testing.T) {
	for in, want := range map[string]int64{"0x1000a2b3c4d0000": 0x1000a2b3c4d0000, "0XFF": 255, "42": 42} {
		got, err := parseSessionID(in)
		if err != nil || got != want {
			t.Errorf("parseSessionID(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0x", "0xzz", "0", "-1"} {
		if _, err := parseSessionID(in); err == nil {
			t.Errorf("parseSessionID(%q) accepted", in)
		}
	}
	for _, in := range []string{"AQID", "AQIDBA==", "AQIDBA"} {
		if _, err := parsePasswd(in); err != nil {
			t.Errorf("parsePasswd(%q): %v", in, err)
		}
	}
	if _, err := parsePasswd("not base64!"); err == nil {
		t.Error("parsePasswd accepted junk")
	}
}

// fakeServer plays a ZooKeeper server's side of closeSession over conn: it checks the
// connect request, answers with resp, and (if it accepted) answers the close.
func fakeServer(t *testing.T, conn net.Conn, resp connectResponse, closeErr int32) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer conn.Close()
		b, err := readFrame(conn)
		if err != nil {
			done <- err
			return
		}
		want := connectRequest{TimeOut: 2000, SessionID: 0x77, Passwd: []byte("secret")}.encode()[4:]
		if !bytes.Equal(b, want) {
			done <- errors.New("unexpected connect request")
			return
		}
		out := append(binary.BigEndian.AppendUint32(nil, 0), resp.encodeForTest()...)
		if _, err := conn.Write(frame(out)); err != nil {
			done <- err
			return
		}
		if resp.TimeOut == 0 {
			done <- nil
			return
		}
		b, err = readFrame(conn)
		if err != nil {
			done <- err
			return
		}
		if !bytes.Equal(b, closeSessionRequest(1)[4:]) {
			done <- errors.New("unexpected close request")
			return
		}
		// A watch notification first (xid -1), then the reply.
		note := binary.BigEndian.AppendUint32(nil, uint32(0xffffffff))
		note = binary.BigEndian.AppendUint64(note, 0)
		note = binary.BigEndian.AppendUint32(note, 0)
		reply := binary.BigEndian.AppendUint32(nil, 1)
		reply = binary.BigEndian.AppendUint64(reply, 0x500000009)
		reply = binary.BigEndian.AppendUint32(reply, uint32(closeErr))
		_, err = conn.Write(append(frame(note), frame(reply)...))
		_, _ = io.Copy(io.Discard, conn)
		done <- err
	}()
	return done
}

func TestCloseSessionConversation(t *testing.T) {
	ctx := context.Background()
	a, b := net.Pipe()
	done := fakeServer(t, b, connectResponse{TimeOut: 2000, SessionID: 0x77, Passwd: []byte("secret")}, 0)
	zxid, err := closeSession(ctx, a, 0x77, []byte("secret"), 2*time.Second)
	a.Close()
	if err != nil || zxid != 0x500000009 {
		t.Fatalf("closeSession = %#x, %v", zxid, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A refused session (expired, or a wrong password): timeOut 0, session 0.
	a, b = net.Pipe()
	done = fakeServer(t, b, connectResponse{Passwd: make([]byte, 16)}, 0)
	_, err = closeSession(ctx, a, 0x77, []byte("secret"), 2*time.Second)
	a.Close()
	var refused *sessionRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("want a refusal, got %v", err)
	}
	<-done

	// The close itself fails.
	a, b = net.Pipe()
	done = fakeServer(t, b, connectResponse{TimeOut: 2000, SessionID: 0x77}, -112)
	_, err = closeSession(ctx, a, 0x77, []byte("secret"), 2*time.Second)
	a.Close()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("session expired")) {
		t.Fatalf("want session expired, got %v", err)
	}
	<-done
}

// expiringCluster is a fake cluster (TEST ONLY) whose servers answer over a pipe as
// ZooKeeper does: while the session lives, a server closes it, and one in drop does so
// but closes the connection before its reply (the race seen on real servers); once it
// is closed, every server refuses it.
type expiringCluster struct {
	*fakeCluster
	t      *testing.T
	drop   map[string]bool
	closed bool
	dialed []string
}

func (c *expiringCluster) Dial(_ context.Context, addr string, _ time.Duration) (net.Conn, error) {
	c.dialed = append(c.dialed, addr)
	a, b := net.Pipe()
	switch {
	case c.closed:
		fakeServer(c.t, b, connectResponse{Passwd: make([]byte, 16)}, 0)
	case c.drop[addr]:
		c.closed = true
		go func() {
			defer b.Close()
			_, _ = readFrame(b)
			_, _ = b.Write(frame(append(binary.BigEndian.AppendUint32(nil, 0),
				connectResponse{TimeOut: 2000, SessionID: 0x77}.encodeForTest()...)))
			_, _ = readFrame(b) // the closeSession request; no reply
		}()
	default:
		c.closed = true
		fakeServer(c.t, b, connectResponse{TimeOut: 2000, SessionID: 0x77, Passwd: []byte("secret")}, 0)
	}
	return a, nil
}

// encodeForTest is the response's body after the protocol version.
func (r connectResponse) encodeForTest() []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(r.TimeOut))
	out = binary.BigEndian.AppendUint64(out, uint64(r.SessionID))
	out = binary.BigEndian.AppendUint32(out, uint32(len(r.Passwd)))
	out = append(out, r.Passwd...)
	return append(out, 0)
}

func TestSessionExpireCountsAnUnansweredCloseThatTheNextServerConfirms(t *testing.T) {
	expire := func(n int, drop ...int) (*expiringCluster, Applied, error) {
		fc := newFakeCluster(n, 1)
		fc.clients[0].SessionID = "0x77"
		c := &expiringCluster{fakeCluster: fc, t: t, drop: map[string]bool{}}
		for _, s := range fc.Servers() {
			if slices.Contains(drop, s.ID) {
				c.drop[netip.AddrPortFrom(s.Host.Addr(), clientPort).String()] = true
			}
		}
		rng := newSteps(Schedule{Classes: Classes()}).next().rng
		a, err := SessionExpire{Target: TargetRandomClient, SessionTimeout: 2 * time.Second}.Apply(context.Background(), c, rng)
		return c, a, err
	}

	// Every server drops the connection before its reply: the first closes the
	// session, the second refuses it, and that confirms the close.
	c, a, err := expire(3, 1, 2, 3)
	if err != nil || len(c.dialed) != 2 || a.Value["confirmed_by"] == nil || a.Value["server"] == nil {
		t.Fatalf("all drop: %v, value %v, dialed %v; want the close confirmed by the second server", err, a.Value, c.dialed)
	}
	// A standalone server that drops: asked again, it confirms.
	c, a, err = expire(1, 1)
	if err != nil || len(c.dialed) != 2 || a.Value["confirmed_by"] != "s1 (it no longer knows the session)" {
		t.Fatalf("standalone: %v, value %v, dialed %v", err, a.Value, c.dialed)
	}
	// Nobody drops: the first server closes it and answers.
	c, a, err = expire(3)
	if err != nil || len(c.dialed) != 1 || a.Value["zxid"] != "0x500000009" || a.Value["confirmed_by"] != nil {
		t.Fatalf("answered: %v, value %v, dialed %v", err, a.Value, c.dialed)
	}
	// The session is gone before the fault: the first refusal is final.
	fc := newFakeCluster(3, 1)
	fc.clients[0].SessionID = "0x77"
	gone := &expiringCluster{fakeCluster: fc, t: t, closed: true}
	_, err = SessionExpire{Target: TargetRandomClient, SessionTimeout: 2 * time.Second}.Apply(context.Background(), gone, newSteps(Schedule{Classes: Classes()}).next().rng)
	var refused *sessionRefusedError
	if !errors.As(err, &refused) || len(gone.dialed) != 1 {
		t.Fatalf("gone: %v after dialing %v; want the first refusal", err, gone.dialed)
	}
}
