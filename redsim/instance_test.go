package redsim

import (
	"testing"
	"testing/synctest"
	"time"
)

// do runs one command on in for s and renders its reply.
func do(in *Instance, s *session, args ...string) string { return in.exec(s, args).String() }

func TestInstanceCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newInstance("i0")
		s := in.newSession()
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"SET", "k", "v", "NX", "PX", "1000"}, "OK"},
			{[]string{"SET", "k", "w", "NX", "PX", "1000"}, "(nil)"},
			{[]string{"GET", "k"}, `"v"`},
			{[]string{"EVAL", `if redis.call("SET", KEYS[1], "x", "NX") then return 1 end return 0`, "1", "k"}, "0"},
			{[]string{"EVAL", `return redis.call("SET", KEYS[1], "x", "NX")`, "1", "k"}, "(nil)"},
			{[]string{"PTTL", "k"}, "1000"},
			{[]string{"TTL", "k"}, "1"},
			{[]string{"PTTL", "nokey"}, "-2"},
			{[]string{"INCR", "n"}, "1"},
			{[]string{"TTL", "n"}, "-1"},
			{[]string{"FOO", "a", "b"}, "(error) ERR unknown command 'FOO', with args beginning with: 'a' 'b' "},
			{[]string{"GET"}, "(error) ERR wrong number of arguments for 'get' command"},
			{[]string{"EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"}, "(error) NOSCRIPT No matching script. Please use EVAL."},
			{[]string{"CLIENT", "ID"}, "1"},
			{[]string{"WAIT", "1", "100"}, "0"},
		} {
			if got := do(in, s, c.args...); got != c.want {
				t.Errorf("%q: got %s, want %s", c.args, got, c.want)
			}
		}
		time.Sleep(1001 * time.Millisecond)
		if got := do(in, s, "GET", "k"); got != "(nil)" {
			t.Errorf("GET k after its TTL: got %s, want (nil)", got)
		}
	})
}
