package redsim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// reply is one RESP reply, rendered for the connection's protocol version by write.
type reply struct {
	kind  replyKind
	str   string
	num   int64
	elems []reply
}

// replyKind is the type of a reply.
type replyKind byte

// The reply types. nilBulk and nilArray are one null in RESP3; mapReply is a flat
// array of keys and values in RESP2.
const (
	statusReply replyKind = '+'
	errorReply  replyKind = '-'
	intReply    replyKind = ':'
	bulkReply   replyKind = '$'
	arrayReply  replyKind = '*'
	nilBulk     replyKind = '_'
	nilArray    replyKind = 'N'
	mapReply    replyKind = '%'
)

func status(s string) reply           { return reply{kind: statusReply, str: s} }
func errorf(f string, a ...any) reply { return reply{kind: errorReply, str: fmt.Sprintf(f, a...)} }
func integer(n int64) reply           { return reply{kind: intReply, num: n} }
func bulk(s string) reply             { return reply{kind: bulkReply, str: s} }
func array(e ...reply) reply          { return reply{kind: arrayReply, elems: e} }

var (
	okReply  = status("OK")
	nilReply = reply{kind: nilBulk}
	// errNotInt is Redis's reply to an argument that should be an integer.
	errNotInt = errorf("ERR value is not an integer or out of range")
	errSyntax = errorf("ERR syntax error")
)

// isErr reports whether r is an error reply.
func (r reply) isErr() bool { return r.kind == errorReply }

// write appends r's encoding in RESP version proto (2 or 3) to b.
func (r reply) write(b []byte, proto int) []byte {
	switch r.kind {
	case statusReply, errorReply:
		b = append(b, byte(r.kind))
		b = append(b, strings.NewReplacer("\r", " ", "\n", " ").Replace(r.str)...)
		return append(b, '\r', '\n')
	case intReply:
		b = append(b, ':')
		b = strconv.AppendInt(b, r.num, 10)
		return append(b, '\r', '\n')
	case bulkReply:
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(r.str)), 10)
		b = append(b, '\r', '\n')
		b = append(b, r.str...)
		return append(b, '\r', '\n')
	case nilBulk, nilArray:
		switch {
		case proto >= 3:
			return append(b, "_\r\n"...)
		case r.kind == nilBulk:
			return append(b, "$-1\r\n"...)
		}
		return append(b, "*-1\r\n"...)
	case mapReply:
		if proto >= 3 {
			b = append(b, '%')
			b = strconv.AppendInt(b, int64(len(r.elems)/2), 10)
		} else {
			b = append(b, '*')
			b = strconv.AppendInt(b, int64(len(r.elems)), 10)
		}
	default:
		b = append(b, '*')
		b = strconv.AppendInt(b, int64(len(r.elems)), 10)
	}
	b = append(b, '\r', '\n')
	for _, e := range r.elems {
		b = e.write(b, proto)
	}
	return b
}

// String renders r for a trace: "OK", "(error) ERR ...", "3", "\"v\"", "(nil)",
// "[a b]".
func (r reply) String() string {
	switch r.kind {
	case statusReply:
		return r.str
	case errorReply:
		return "(error) " + r.str
	case intReply:
		return strconv.FormatInt(r.num, 10)
	case bulkReply:
		return strconv.Quote(r.str)
	case nilBulk, nilArray:
		return "(nil)"
	}
	parts := make([]string, len(r.elems))
	for i, e := range r.elems {
		parts[i] = e.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Limits on a request, below Redis's (proto-max-bulk-len is 512 MB there): a lock
// recipe's requests are far smaller, and a bad frame must not allocate much.
const (
	maxArgs    = 1 << 10
	maxBulkLen = 1 << 20
	maxInline  = 64 << 10
)

// protocolError is a malformed request: the connection is answered with it and
// closed, as Redis does.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "ERR Protocol error: " + e.msg }

// readCommand reads one request: a RESP array of bulk strings, or an inline command
// (words separated by spaces). An empty inline line yields no arguments. A malformed
// frame is a *protocolError; other errors come from the reader.
func readCommand(br *bufio.Reader) ([]string, error) {
	first, err := br.ReadByte()
	if err != nil {
		return nil, err
	}
	if first != '*' {
		if err := br.UnreadByte(); err != nil {
			return nil, err
		}
		line, err := readLine(br, maxInline, "too big inline request")
		if err != nil {
			return nil, err
		}
		return strings.Fields(line), nil
	}
	line, err := readLine(br, 32, "invalid multibulk length")
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(line)
	if err != nil || n > maxArgs {
		return nil, &protocolError{"invalid multibulk length"}
	}
	args := make([]string, 0, max(n, 0))
	for range n {
		arg, err := readBulk(br)
		if err != nil {
			return nil, err
		}
		args = append(args, arg)
	}
	return args, nil
}

// readBulk reads one "$<len>\r\n<bytes>\r\n".
func readBulk(br *bufio.Reader) (string, error) {
	c, err := br.ReadByte()
	if err != nil {
		return "", err
	}
	if c != '$' {
		return "", &protocolError{fmt.Sprintf("expected '$', got '%c'", c)}
	}
	line, err := readLine(br, 32, "invalid bulk length")
	if err != nil {
		return "", err
	}
	size, err := strconv.Atoi(line)
	if err != nil || size < 0 || size > maxBulkLen {
		return "", &protocolError{"invalid bulk length"}
	}
	b := make([]byte, size+2)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", err
	}
	if b[size] != '\r' || b[size+1] != '\n' {
		return "", &protocolError{"invalid bulk length"}
	}
	return string(b[:size]), nil
}

// readLine reads up to "\r\n" (or "\n"), failing with a protocol error named what
// when the line is longer than limit.
func readLine(br *bufio.Reader, limit int, what string) (string, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		if c == '\n' {
			return strings.TrimSuffix(string(b), "\r"), nil
		}
		if len(b) >= limit {
			return "", &protocolError{what}
		}
		b = append(b, c)
	}
}

// isProtocolError reports whether err is a malformed frame.
func isProtocolError(err error) bool {
	var pe *protocolError
	return errors.As(err, &pe)
}
