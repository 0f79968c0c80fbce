package redsim

import (
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// Values a generated command draws from.
var (
	diffKeys    = []string{"k1", "k2", "redsim-lock", "redsim-lock:fence"}
	diffValues  = []string{"v1", "v2", "0x1:abc", "7", ""}
	diffAmounts = []string{"20000", "500000", "0", "-5", "abc", "9223372036854775807"}
	// diffSnippets exercise Lua's conversions and redis.call's errors.
	diffSnippets = []string{
		`return 3.7`, `return {1,2,nil,4}`, `return true`, `return false`, `return nil`,
		`return redis.call("PING")`, `return redis.error_reply("My Error")`, `return redis.status_reply("FINE")`,
		`return {err="boom"}`, `return redis.pcall("INCR", KEYS[1])`, `return redis.call("INCR", KEYS[1])`,
		`return redis.call("GET")`, `return redis.call("NOPE")`, `return redis.call("SET", KEYS[1], 1.5)`,
		`return redis.call("SET", KEYS[1], 12345678901234567)`, `return redis.sha1hex(ARGV[1])`,
		`return {1, {2, "x"}, redis.call("GET", "nokey")}`, `local t = redis.call("SET", KEYS[1], "b") return t.ok`,
		`return redis.call("GET", {})`, `return redis.pcall("SET", KEYS[1])`, `return redis.call("PTTL", KEYS[1])`,
	}
)

// harvestScripts runs each Redis recipe of the catalogue once (acquire, release)
// in the simulator and returns every script it evaluated.
func harvestScripts(t *testing.T) []string {
	t.Helper()
	found := map[string]bool{}
	for _, m := range append([]string{"redis-lock", "redislock", "redsync"}, mutantNames()...) {
		rec := catalog(t, m)
		synctest.Test(t, func(t *testing.T) {
			n := 1
			if slices.Contains([]string{"redsync", "mutant-redlock-minority", "mutant-redlock-no-elapsed-check"}, m) {
				n = 3
			}
			r, err := newLockRun(LockConfig{Recipe: rec, Instances: n}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Teardown()
			// Acquire, hold past a third of the TTL (the extenders' period), release.
			for _, st := range []Step{{Kind: StepAcquire}, {Kind: StepRun}, {Kind: StepRun}, {Kind: StepTick, D: 400 * time.Millisecond},
				{Kind: StepRun}, {Kind: StepRelease}, {Kind: StepRun}, {Kind: StepRun}} {
				if r.can(st.Kind, 0) {
					r.apply(st, st.String())
				}
			}
			for _, in := range r.sim.insts {
				for _, src := range in.scripts {
					found[src] = true
				}
			}
		})
	}
	return slices.Sorted(maps.Keys(found))
}

func mutantNames() []string {
	var out []string
	for _, m := range mutants {
		out = append(out, m.name)
	}
	return out
}

// genCommand draws one command of a differential stream; scripts are the
// recipes' scripts.
func genCommand(rt *rapid.T, scripts []string) []string {
	key := rapid.SampledFrom(diffKeys)
	val := rapid.SampledFrom(diffValues)
	amount := rapid.SampledFrom(diffAmounts)
	src := rapid.SampledFrom(append(slices.Clone(diffSnippets), scripts...))
	d := func(g *rapid.Generator[string], label string) string { return g.Draw(rt, label) }
	switch rapid.IntRange(0, 20).Draw(rt, "command") {
	case 0, 1, 2:
		args := []string{"SET", d(key, "key"), d(val, "value")}
		for range rapid.IntRange(0, 3).Draw(rt, "options") {
			switch opt := rapid.SampledFrom([]string{"NX", "XX", "GET", "KEEPTTL", "PX", "EX", "PXAT", "EXAT", "FOO"}).Draw(rt, "option"); opt {
			case "PX", "EX":
				args = append(args, opt, d(amount, "amount"))
			case "PXAT":
				args = append(args, opt, rapid.SampledFrom([]string{"1", "4102444800000"}).Draw(rt, "at"))
			case "EXAT":
				args = append(args, opt, rapid.SampledFrom([]string{"1", "4102444800"}).Draw(rt, "at"))
			default:
				args = append(args, opt)
			}
		}
		return args
	case 3:
		return []string{rapid.SampledFrom([]string{"GET", "INCR", "PTTL", "TTL"}).Draw(rt, "read"), d(key, "key")}
	case 4:
		return append([]string{rapid.SampledFrom([]string{"DEL", "EXISTS", "MGET"}).Draw(rt, "multi")}, rapid.SliceOfN(key, 1, 3).Draw(rt, "keys")...)
	case 5:
		args := []string{rapid.SampledFrom([]string{"PEXPIRE", "EXPIRE"}).Draw(rt, "expire"), d(key, "key"), d(amount, "amount")}
		return append(args, rapid.SliceOfN(rapid.SampledFrom([]string{"NX", "XX", "GT", "LT", "BAD"}), 0, 2).Draw(rt, "flags")...)
	case 6, 7, 8, 9:
		return evalCommand(rt, "EVAL", src.Draw(rt, "script"))
	case 10:
		s := src.Draw(rt, "script")
		if rapid.Bool().Draw(rt, "unknown sha") {
			return evalCommand(rt, "EVALSHA", "ffffffffffffffffffffffffffffffffffffffff")
		}
		return evalCommand(rt, "EVALSHA", sha1hex(s))
	case 11:
		s := src.Draw(rt, "script")
		return rapid.SampledFrom([][]string{{"SCRIPT", "LOAD", s}, {"SCRIPT", "EXISTS", sha1hex(s), "abc"}, {"SCRIPT", "BOGUS"}}).Draw(rt, "script command")
	case 12:
		return rapid.SampledFrom([][]string{{"PING"}, {"PING", "hi"}, {"PING", "a", "b"}, {"ECHO", "x"}, {"ECHO"}, {"WAIT", "0", "0"}, {"WAIT", "0", "-1"}}).Draw(rt, "misc")
	case 13:
		return []string{"SELECT", rapid.SampledFrom([]string{"0", "1", "15", "16", "a", "-1"}).Draw(rt, "db")}
	case 14:
		return rapid.SampledFrom([][]string{{"CLIENT", "SETNAME", "zlc-worker-0"}, {"CLIENT", "SETNAME", "a b"}, {"CLIENT", "GETNAME"}, {"CLIENT", "BOGUS"}, {"CLIENT", "ID", "x"}}).Draw(rt, "client")
	case 15:
		return rapid.SampledFrom([][]string{{"HELLO", "2"}, {"HELLO", "3"}, {"HELLO", "2", "SETNAME", "x"}, {"HELLO", "2", "AUTH", "default", "pw"}, {"HELLO", "4"}, {"HELLO", "a"}, {"HELLO", "2", "FOO"}}).Draw(rt, "hello")
	case 16:
		return rapid.SampledFrom([][]string{{"FOO", "a", "b"}, {"GET"}, {"SET", "k"}, {"INCR"}, {"PTTL", "a", "b"}, {"GETRANGE", "k1", "0"}}).Draw(rt, "bad")
	case 17:
		return []string{"GETRANGE", d(key, "key"), rapid.SampledFrom([]string{"0", "-3", "2", "abc"}).Draw(rt, "start"), rapid.SampledFrom([]string{"-1", "1", "100", "-10"}).Draw(rt, "end")}
	case 18:
		return []string{rapid.SampledFrom([]string{"MSET", "MSETNX"}).Draw(rt, "mset"), d(key, "key"), d(val, "value"), d(key, "key2"), d(val, "value2")}
	}
	return []string{"MSET", d(key, "key")}
}

// evalCommand is EVAL or EVALSHA of script with a drawn number of keys (valid or
// not) and arguments: a value and a TTL, as the recipes' scripts take.
func evalCommand(rt *rapid.T, cmd, script string) []string {
	numkeys := rapid.SampledFrom([]string{"1", "1", "2", "0", "-1", "abc", "9"}).Draw(rt, "numkeys")
	args := []string{cmd, script, numkeys}
	args = append(args, rapid.SliceOfN(rapid.SampledFrom(diffKeys), 0, 2).Draw(rt, "keys")...)
	args = append(args, rapid.SampledFrom(diffValues).Draw(rt, "arg value"))
	return append(args, rapid.SampledFrom([]string{"20000", "44", "0"}).Draw(rt, "arg ttl"))
}
