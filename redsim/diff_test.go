package redsim

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestDiffRedisServer holds the simulator to a real redis-server (Debian's 7.0.15,
// started on a free loopback port with no persistence and stopped at the end):
// rapid generates command streams (the lock commands with valid and invalid
// options, the recipes' and libraries' scripts by EVAL and EVALSHA, Lua's
// conversions, unknown commands, wrong arities), and each command goes to both,
// on one connection each, the replies compared field by field.
//
// Time differs legitimately: the real server's clock and the simulator's (the
// process's, outside a bubble) are read at different instants. So expiries are
// drawn either far from now (10 s to 1000 s ahead, or already past) so that no key
// expires during a stream, and PTTL and TTL replies are compared within a
// tolerance (250 ms; one second for TTL's rounding). What is known to differ is
// left out of the streams: CLIENT ID's value (another server numbers other
// connections), HELLO's id, CLIENT SETINFO (Redis 7.2; the simulator accepts it,
// 7.0 does not know it), WAIT for replicas (Redis blocks for its timeout; the
// simulator answers 0 at once), and scripts that touch undefined globals (Redis
// protects the global table; the simulator does not). A script's runtime error is
// compared on its line and its script, not on Lua's own message: gopher-lua words
// those its own way.
//
// It starts a real server: run it under the ensemble lock, not in -short:
//
//	flock /tmp/zlc-ensemble.lock go test ./redsim/ -run TestDiffRedisServer
func TestDiffRedisServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	scripts := harvestScripts(t)
	if len(scripts) < 5 {
		t.Fatalf("the recipes evaluated %d scripts, want their acquire, release and extend scripts", len(scripts))
	}
	addr := startRedis(t)
	compared := 0
	defer func() {
		t.Logf("%d commands compared, %d scripts of the recipes among the draws", compared, len(scripts))
	}()
	rapid.Check(t, func(rt *rapid.T) {
		real, err := net.Dial("tcp", addr)
		if err != nil {
			rt.Fatal(err)
		}
		defer real.Close()
		rr := bufio.NewReader(real)
		for _, c := range [][]string{{"FLUSHALL"}, {"SCRIPT", "FLUSH"}} {
			if _, err := real.Write(encode(c)); err != nil {
				rt.Fatal(err)
			}
			if _, err := readReply(rr); err != nil {
				rt.Fatal(err)
			}
		}
		in := newInstance("diff")
		s := in.newSession()
		for i, n := 0, rapid.IntRange(1, 40).Draw(rt, "commands"); i < n; i++ {
			args := genCommand(rt, scripts)
			if _, err := real.Write(encode(args)); err != nil {
				rt.Fatal(err)
			}
			want, err := readReply(rr)
			if err != nil {
				rt.Fatalf("%q: reading redis-server's reply: %v", args, err)
			}
			got, err := readReply(bufio.NewReader(strings.NewReader(string(in.exec(s, args).write(nil, s.proto)))))
			if err != nil {
				rt.Fatalf("%q: reading the simulator's reply: %v", args, err)
			}
			compared++
			if d := diffReply(strings.ToLower(args[0]), got, want); d != "" {
				rt.Fatalf("%s: %s\nsimulator: %v\nredis-server: %v", quoteArgs(args), d, got, want)
			}
		}
	})
}

// startRedis starts redis-server on a free loopback port, stopped when t ends.
func startRedis(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("redis-server did not listen on %s", addr)
	return ""
}

// encode is a request in RESP.
func encode(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply parses one RESP2 or RESP3 reply (the kinds the simulator sends).
func readReply(br *bufio.Reader) (reply, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return reply{}, fmt.Errorf("empty line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return status(body), nil
	case '-':
		return reply{kind: errorReply, str: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		return integer(n), err
	case '_':
		return nilReply, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nilReply, err
		}
		b := make([]byte, n+2)
		if _, err := ioReadFull(br, b); err != nil {
			return reply{}, err
		}
		return bulk(string(b[:n])), nil
	case '*', '%':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return reply{kind: nilArray}, err
		}
		if line[0] == '%' {
			n *= 2
		}
		r := reply{kind: arrayReply}
		for range n {
			e, err := readReply(br)
			if err != nil {
				return reply{}, err
			}
			r.elems = append(r.elems, e)
		}
		return r, nil
	}
	return reply{}, fmt.Errorf("unknown reply %q", line)
}

func ioReadFull(br *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := br.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// luaErrorRE matches a script's runtime error as Redis 7 words it: where, Lua's
// message, which script.
var luaErrorRE = regexp.MustCompile(`^ERR user_script:(\d+): .* (script: [0-9a-f]{40}, on @user_script:\d+\.)$`)

// luaRuntimeError is a script's runtime error without Lua's own message (gopher-lua
// words "attempt to perform arithmetic on a nil value" its own way), or "".
func luaRuntimeError(s string) string {
	m := luaErrorRE.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1] + " " + m[2]
}

// diffReply compares two replies field by field and says how they differ, or "".
// PTTL and TTL are compared within their tolerance; a null bulk and a null array
// count as one null (RESP3 has one).
func diffReply(cmd string, got, want reply) string {
	null := func(k replyKind) bool { return k == nilBulk || k == nilArray }
	if cmd == "hello" && len(got.elems) == 14 && len(want.elems) == 14 {
		got.elems[7] = want.elems[7] // the connection's id
	}
	switch {
	case null(got.kind) && null(want.kind):
		return ""
	case got.kind != want.kind:
		return fmt.Sprintf("kind %c, want %c", got.kind, want.kind)
	case got.kind == intReply && (cmd == "pttl" || cmd == "ttl"):
		tol := int64(250)
		if cmd == "ttl" {
			tol = 1
		}
		if d := got.num - want.num; d > tol || d < -tol || (got.num < 0) != (want.num < 0) {
			return fmt.Sprintf("%s %d, want %d (within %d)", cmd, got.num, want.num, tol)
		}
		return ""
	case got.kind == errorReply && luaRuntimeError(got.str) != "" && luaRuntimeError(got.str) == luaRuntimeError(want.str):
		return ""
	case got.str != want.str || got.num != want.num:
		return fmt.Sprintf("value %v, want %v", got, want)
	case len(got.elems) != len(want.elems):
		return fmt.Sprintf("%d elements, want %d", len(got.elems), len(want.elems))
	}
	for i := range got.elems {
		if d := diffReply(cmd, got.elems[i], want.elems[i]); d != "" {
			return fmt.Sprintf("element %d: %s", i, d)
		}
	}
	return ""
}
