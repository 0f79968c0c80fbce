package nemesis

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The little of ZooKeeper's client wire protocol that expiring someone else's session
// needs: frames are a big-endian int32 length and that many bytes; buffers are an int32
// length and the bytes; booleans one byte.

const (
	opCloseSession = -11
	closeXid       = 1
	maxFrame       = 1 << 20
)

// connectRequest attaches a connection to a session (SessionID 0 asks for a new one).
type connectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32 // milliseconds
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
}

// connectResponse is the server's answer: TimeOut 0 (and SessionID 0) means it refused
// the session: expired, or a wrong password.
type connectResponse struct {
	ProtocolVersion int32
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
}

// replyHeader starts every reply to a request.
type replyHeader struct {
	Xid  int32
	Zxid int64
	Err  int32
}

// frame prefixes body with its length.
func frame(body []byte) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	return append(out, body...)
}

func (r connectRequest) encode() []byte {
	b := make([]byte, 0, 64)
	b = binary.BigEndian.AppendUint32(b, uint32(r.ProtocolVersion))
	b = binary.BigEndian.AppendUint64(b, uint64(r.LastZxidSeen))
	b = binary.BigEndian.AppendUint32(b, uint32(r.TimeOut))
	b = binary.BigEndian.AppendUint64(b, uint64(r.SessionID))
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Passwd)))
	b = append(b, r.Passwd...)
	if r.ReadOnly {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return frame(b)
}

// closeSessionRequest is a request header {xid, type closeSession} with no body.
func closeSessionRequest(xid int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	op := int32(opCloseSession)
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	return frame(b)
}

// decodeConnectResponse parses a connect response frame body. The trailing readOnly
// byte is optional (old servers do not send it).
func decodeConnectResponse(b []byte) (connectResponse, error) {
	var r connectResponse
	if len(b) < 20 {
		return r, fmt.Errorf("connect response too short: %d bytes", len(b))
	}
	r.ProtocolVersion = int32(binary.BigEndian.Uint32(b[0:]))
	r.TimeOut = int32(binary.BigEndian.Uint32(b[4:]))
	r.SessionID = int64(binary.BigEndian.Uint64(b[8:]))
	n := int32(binary.BigEndian.Uint32(b[16:]))
	rest := b[20:]
	if n > 0 {
		if int(n) > len(rest) {
			return r, fmt.Errorf("connect response: password of %d bytes, only %d left", n, len(rest))
		}
		r.Passwd = append([]byte(nil), rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 {
		r.ReadOnly = rest[0] != 0
	}
	return r, nil
}

func decodeReplyHeader(b []byte) (replyHeader, error) {
	if len(b) < 16 {
		return replyHeader{}, fmt.Errorf("reply too short: %d bytes", len(b))
	}
	return replyHeader{
		Xid:  int32(binary.BigEndian.Uint32(b[0:])),
		Zxid: int64(binary.BigEndian.Uint64(b[4:])),
		Err:  int32(binary.BigEndian.Uint32(b[12:])),
	}, nil
}

func readFrame(r io.Reader) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes: not ZooKeeper", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// sessionRefusedError says a server would not attach to the session: it has expired
// already, or the password is wrong. Trying another server will not help.
type sessionRefusedError struct{ id int64 }

func (e *sessionRefusedError) Error() string {
	return fmt.Sprintf("server refused session 0x%x: it has expired or the password is wrong", e.id)
}

// closeUnansweredError says the closeSession request went out but no reply came back:
// the close may have happened (a server closes the session's connections, ours
// among them, sometimes before it answers).
type closeUnansweredError struct{ err error }

func (e *closeUnansweredError) Error() string {
	return fmt.Sprintf("read closeSession reply: %v", e.err)
}

func (e *closeUnansweredError) Unwrap() error { return e.err }

// closeSession attaches conn to session id (proving it with passwd) and closes that
// session, which the ensemble then ends for every connection that uses it: its
// ephemeral nodes go, and its owner learns it expired. It returns the close's zxid.
func closeSession(ctx context.Context, conn net.Conn, id int64, passwd []byte, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(5 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := connectRequest{TimeOut: int32(timeout.Milliseconds()), SessionID: id, Passwd: passwd}
	if _, err := conn.Write(req.encode()); err != nil {
		return 0, fmt.Errorf("send connect request: %w", err)
	}
	b, err := readFrame(conn)
	if err != nil {
		return 0, fmt.Errorf("read connect response: %w", err)
	}
	resp, err := decodeConnectResponse(b)
	if err != nil {
		return 0, err
	}
	if resp.TimeOut <= 0 || resp.SessionID != id {
		return 0, &sessionRefusedError{id: id}
	}
	if _, err := conn.Write(closeSessionRequest(closeXid)); err != nil {
		return 0, fmt.Errorf("send closeSession: %w", err)
	}
	// Skip anything that is not our reply (watch notifications, xid -1).
	for range 16 {
		b, err := readFrame(conn)
		if err != nil {
			return 0, &closeUnansweredError{err}
		}
		h, err := decodeReplyHeader(b)
		if err != nil {
			return 0, err
		}
		if h.Xid != closeXid {
			continue
		}
		if h.Err != 0 {
			return h.Zxid, fmt.Errorf("closeSession: %s", zkError(h.Err))
		}
		return h.Zxid, nil
	}
	return 0, fmt.Errorf("closeSession: no reply among 16 frames")
}

func zkError(code int32) string {
	names := map[int32]string{
		-4: "connection loss", -5: "marshalling error", -6: "unimplemented",
		-7: "operation timeout", -8: "bad arguments", -101: "no node", -102: "no auth",
		-112: "session expired", -115: "auth failed", -118: "session moved",
		-124: "quota exceeded", -125: "throttled",
	}
	if n, ok := names[code]; ok {
		return fmt.Sprintf("%s (%d)", n, code)
	}
	return fmt.Sprintf("error %d", code)
}

// parseSessionID reads a session id as workers report it: "0x" and hex digits (plain
// decimal is accepted too).
func parseSessionID(s string) (int64, error) {
	s = strings.TrimSpace(s)
	var u uint64
	var err error
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		u, err = strconv.ParseUint(h, 16, 64)
	} else {
		u, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil || u == 0 {
		return 0, fmt.Errorf("bad session id %q", s)
	}
	return int64(u), nil
}

// parsePasswd decodes a base64 session password (padded or not).
func parsePasswd(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("session password is not base64")
	}
	return b, nil
}
