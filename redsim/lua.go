package redsim

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// luaEngine runs an instance's scripts in one Lua state (gopher-lua, Lua 5.1 as
// Redis's), with the base, table, string and math libraries and the redis table;
// compiled scripts are kept by SHA1.
type luaEngine struct {
	L     *lua.LState
	procs map[string]*lua.FunctionProto
	// in and s are the instance and session of the running script.
	in *Instance
	s  *session
	// raised is the error table the running script's last failed redis.call
	// raised, and line the script's line it was called from.
	raised *lua.LTable
	line   string
}

// engine returns the instance's Lua engine, made on first use.
func (in *Instance) engine() *luaEngine {
	if in.lua == nil {
		in.lua = newLuaEngine(in)
	}
	return in.lua
}

func newLuaEngine(in *Instance) *luaEngine {
	// A lock's scripts are short: small stacks (the defaults would be most of a
	// run's allocations).
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 64, RegistrySize: 1024, RegistryMaxSize: 64 * 1024})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, name := range []string{"dofile", "loadfile", "print"} {
		L.SetGlobal(name, lua.LNil)
	}
	e := &luaEngine{L: L, procs: map[string]*lua.FunctionProto{}, in: in}
	r := L.NewTable()
	L.SetFuncs(r, map[string]lua.LGFunction{
		"call":         func(L *lua.LState) int { return e.call(L, true) },
		"pcall":        func(L *lua.LState) int { return e.call(L, false) },
		"error_reply":  func(L *lua.LState) int { return statusTable(L, "err") },
		"status_reply": func(L *lua.LState) int { return statusTable(L, "ok") },
		"sha1hex": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				L.RaiseError("wrong number of arguments")
			}
			var arg string // nil, a table...: the empty string's, as Redis's
			switch v := L.Get(1).(type) {
			case lua.LString:
				arg = string(v)
			case lua.LNumber:
				arg = luaNumberString(float64(v))
			}
			L.Push(lua.LString(sha1hex(arg)))
			return 1
		},
		"log":                func(*lua.LState) int { return 0 },
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
	})
	for i, level := range []string{"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"} {
		r.RawSetString(level, lua.LNumber(i))
	}
	L.SetGlobal("redis", r)
	return e
}

func (e *luaEngine) close() { e.L.Close() }

// sha1hex is a script's name: the SHA1 of its source in lower-case hex.
func sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// compile returns sha's compiled script.
func (e *luaEngine) compile(sha, src string) (*lua.FunctionProto, error) {
	if p, ok := e.procs[sha]; ok {
		return p, nil
	}
	chunk, err := parse.Parse(strings.NewReader(src), "user_script")
	if err != nil {
		return nil, err
	}
	p, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return nil, err
	}
	e.procs[sha] = p
	return p, nil
}

// compileError is the reply to a script that does not compile.
func compileError(err error) reply {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	return errorf("ERR Error compiling script (new function): %s", msg)
}

// runScript runs a script with its KEYS and ARGV, its time frozen at its start as
// Redis's is, and converts what it returns.
func (in *Instance) runScript(s *session, sha, src string, keys, argv []string) reply {
	e := in.engine()
	p, err := e.compile(sha, src)
	if err != nil {
		return compileError(err)
	}
	in.frozen = in.nowMs()
	e.s, e.raised = s, nil
	defer func() { in.frozen, e.s, e.raised = 0, nil, nil }()
	L := e.L
	L.SetGlobal("KEYS", stringTable(L, keys))
	L.SetGlobal("ARGV", stringTable(L, argv))
	L.Push(L.NewFunctionFromProto(p))
	if err := L.PCall(0, 1, nil); err != nil {
		return e.scriptError(err, sha)
	}
	ret := L.Get(-1)
	L.Pop(1)
	return fromLua(ret, 0)
}

// scriptError is the reply to a script that raised an error, as Redis 7 words it:
// a failed redis.call's error with "script: <sha>, on @user_script:<line>."
// appended, an error table the script raised itself as it is, anything else as
// "ERR <message> script: ...".
func (e *luaEngine) scriptError(err error, sha string) reply {
	var ae *lua.ApiError
	if !errors.As(err, &ae) {
		return errorf("ERR %v script: %s", err, sha)
	}
	if t, ok := ae.Object.(*lua.LTable); ok {
		if msg, ok := t.RawGetString("err").(lua.LString); ok {
			if t == e.raised {
				return errorf("%s script: %s, on @user_script:%s.", msg, sha, e.line)
			}
			return reply{kind: errorReply, str: string(msg)}
		}
	}
	msg := ae.Object.String()
	return errorf("ERR %s script: %s, on @user_script:%s.", msg, sha, lineOf(msg))
}

// lineOf finds the line number in a Lua error message ("user_script:3: ...").
func lineOf(msg string) string {
	if _, rest, ok := strings.Cut(msg, "user_script:"); ok {
		if n, _, ok := strings.Cut(rest, ":"); ok {
			return n
		}
	}
	return "0"
}

func stringTable(L *lua.LState, ss []string) *lua.LTable {
	t := L.CreateTable(len(ss), 0)
	for _, s := range ss {
		t.Append(lua.LString(s))
	}
	return t
}

// statusTable is redis.error_reply and redis.status_reply: {field = message}.
func statusTable(L *lua.LState, field string) int {
	t := L.NewTable()
	t.RawSetString(field, lua.LString(L.CheckString(1)))
	L.Push(t)
	return 1
}

// call is redis.call (raise) and redis.pcall (return the error table): it runs a
// command on the script's instance and converts its reply to Lua.
func (e *luaEngine) call(L *lua.LState, raise bool) int {
	fail := func(msg string) int {
		t := L.NewTable()
		t.RawSetString("err", lua.LString(msg))
		if raise {
			e.raised, e.line = t, lineOf(L.Where(1))
			L.Error(t, 1)
		}
		L.Push(t)
		return 1
	}
	n := L.GetTop()
	if n == 0 {
		return fail("ERR Please specify at least one argument for this redis lib call")
	}
	args := make([]string, n)
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args[i-1] = string(v)
		case lua.LNumber:
			args[i-1] = luaNumberString(float64(v))
		default:
			return fail("ERR Lua redis lib command arguments must be strings or integers")
		}
	}
	name := strings.ToLower(args[0])
	cmd, ok := commands[name]
	switch {
	case !ok:
		return fail("ERR Unknown Redis command called from script")
	case noScript[name]:
		return fail("ERR This Redis command is not allowed from script")
	case (cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity):
		return fail("ERR Wrong number of args calling Redis command from script")
	}
	r := e.in.exec(&session{id: e.s.id, proto: 2, db: e.s.db, name: e.s.name}, args)
	if r.isErr() {
		return fail(r.str)
	}
	L.Push(toLua(L, r))
	return 1
}

// noScript are the commands a script may not call.
var noScript = map[string]bool{"eval": true, "evalsha": true, "script": true, "client": true, "hello": true, "wait": true}

// luaNumberString formats a number argument of redis.call as Redis does
// ("%.17g").
func luaNumberString(f float64) string {
	return fmt.Sprintf("%.17g", f)
}

// toLua converts a reply to Lua by Redis's rules: integer to number, bulk to string,
// null to false, array to table, status to {ok=...}, error to {err=...}.
func toLua(L *lua.LState, r reply) lua.LValue {
	switch r.kind {
	case intReply:
		return lua.LNumber(r.num)
	case bulkReply:
		return lua.LString(r.str)
	case statusReply, errorReply:
		t := L.NewTable()
		field := "ok"
		if r.kind == errorReply {
			field = "err"
		}
		t.RawSetString(field, lua.LString(r.str))
		return t
	case arrayReply, mapReply:
		t := L.CreateTable(len(r.elems), 0)
		for _, e := range r.elems {
			t.Append(toLua(L, e))
		}
		return t
	}
	return lua.LFalse
}

// maxDepth bounds the nesting of a script's reply.
const maxDepth = 64

// fromLua converts a script's value to a reply by Redis's rules: number to integer
// (truncated), string to bulk, true to 1, false and nil to null, a table with err
// or ok to an error or status reply, any other table to an array up to its first
// nil.
func fromLua(v lua.LValue, depth int) reply {
	switch v := v.(type) {
	case lua.LNumber:
		return integer(int64(float64(v)))
	case lua.LString:
		return bulk(string(v))
	case lua.LBool:
		if v {
			return integer(1)
		}
	case *lua.LTable:
		if err, ok := v.RawGetString("err").(lua.LString); ok {
			return reply{kind: errorReply, str: string(err)}
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return status(string(s))
		}
		if depth >= maxDepth {
			return errorf("ERR reached lua stack limit")
		}
		var out []reply
		for i := 1; ; i++ {
			e := v.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			out = append(out, fromLua(e, depth+1))
		}
		return array(out...)
	}
	return nilReply
}
