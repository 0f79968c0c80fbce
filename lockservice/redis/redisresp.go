package redis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// The harness speaks to its Redis instances in RESP2, the protocol's plain form: a
// command is an array of bulk strings, a reply one of five types. A few commands
// (PING, INFO, CLIENT LIST, GET, EXISTS) are all it needs, so it carries its own
// client rather than a library's pool, retries and timeouts.

// respError is an error reply ("-ERR ...", "-LOADING ...").
type respError string

func (e respError) Error() string { return string(e) }

// maxBulk bounds a bulk reply the harness reads (CLIENT LIST of many clients is the
// largest it asks for).
const maxBulk = 64 << 20

// respConn is one connection to an instance.
type respConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func newRespConn(conn net.Conn) *respConn {
	return &respConn{conn: conn, r: bufio.NewReader(conn)}
}

// pipeline sends every command, then reads one reply per command: a reply is a
// string, an int64, nil, a []any, or a respError.
func (c *respConn) pipeline(cmds ...[]string) ([]any, error) {
	var b strings.Builder
	for _, args := range cmds {
		writeCommand(&b, args)
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return nil, err
	}
	out := make([]any, len(cmds))
	for i := range out {
		v, err := readReply(c.r)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// writeCommand appends args as a RESP array of bulk strings.
func writeCommand(b *strings.Builder, args []string) {
	fmt.Fprintf(b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(b, "$%d\r\n%s\r\n", len(a), a)
	}
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return nil, errors.New("resp: empty line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		return readBulk(r, body)
	case '*':
		return readArray(r, body)
	}
	return nil, fmt.Errorf("resp: unexpected reply %q", line)
}

// readBulk reads a bulk string of the length given (-1: nil).
func readBulk(r *bufio.Reader, length string) (any, error) {
	n, err := strconv.Atoi(length)
	switch {
	case err != nil || n < -1 || n > maxBulk:
		return nil, fmt.Errorf("resp: bad bulk length %q", length)
	case n == -1:
		return nil, nil
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	if string(buf[n:]) != "\r\n" {
		return nil, errors.New("resp: bulk string not ended by CRLF")
	}
	return string(buf[:n]), nil
}

// readArray reads an array of the length given (-1: nil).
func readArray(r *bufio.Reader, length string) (any, error) {
	n, err := strconv.Atoi(length)
	switch {
	case err != nil || n < -1 || n > 1<<20:
		return nil, fmt.Errorf("resp: bad array length %q", length)
	case n == -1:
		return nil, nil
	}
	out := make([]any, n)
	for i := range out {
		if out[i], err = readReply(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replyString is a reply that should be a string (simple or bulk).
func replyString(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	if e, ok := v.(respError); ok {
		return "", e
	}
	return "", fmt.Errorf("resp: want a string, got %T", v)
}

// replyInt is a reply that should be an integer.
func replyInt(v any) (int64, error) {
	if n, ok := v.(int64); ok {
		return n, nil
	}
	if e, ok := v.(respError); ok {
		return 0, e
	}
	return 0, fmt.Errorf("resp: want an integer, got %T", v)
}

// replyArray is a reply that should be an array.
func replyArray(v any) ([]any, error) {
	if a, ok := v.([]any); ok {
		return a, nil
	}
	if e, ok := v.(respError); ok {
		return nil, e
	}
	return nil, fmt.Errorf("resp: want an array, got %T", v)
}

// replyFields is a reply that should be an array of field names and values, in
// turn (SENTINEL MASTER's), as a map.
func replyFields(v any) (map[string]string, error) {
	a, err := replyArray(v)
	if err != nil {
		return nil, err
	}
	if len(a)%2 != 0 {
		return nil, fmt.Errorf("resp: want field-value pairs, got %d items", len(a))
	}
	m := make(map[string]string, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		k, err := replyString(a[i])
		if err != nil {
			return nil, err
		}
		val, err := replyString(a[i+1])
		if err != nil {
			return nil, err
		}
		m[k] = val
	}
	return m, nil
}
