package redsim

import (
	"strconv"
	"strings"
	"time"
)

// Instance is one simulated Redis server: sixteen databases of string keys with
// millisecond expiry, a script cache, and a clock that is the bubble's plus an
// offset (a server clock jump moves the offset). It runs one command at a time, as
// Redis does; the Sim calls it under its lock.
type Instance struct {
	name   string
	offset time.Duration
	dbs    [numDBs]map[string]*entry
	// scripts maps a script's SHA1 (lower-case hex) to its source.
	scripts map[string]string
	lua     *luaEngine
	// nextID numbers connections (CLIENT ID), from 1 after every start.
	nextID int64
	// frozen is the time a running script sees, in ms; 0 outside scripts.
	frozen int64
	// starts counts restarts.
	starts int
}

// numDBs is Redis's default number of databases.
const numDBs = 16

// entry is a key's value and its expiry, in ms of the instance's clock (0: none).
type entry struct {
	val      string
	expireAt int64
}

// session is what an instance knows of one connection.
type session struct {
	id    int64
	proto int
	db    int
	name  string
}

// newInstance returns an empty instance.
func newInstance(name string) *Instance {
	in := &Instance{name: name}
	in.reset()
	return in
}

// reset empties the instance as a restart without persistence does: keys,
// scripts, connection numbering.
func (in *Instance) reset() {
	for i := range in.dbs {
		in.dbs[i] = map[string]*entry{}
	}
	in.scripts = map[string]string{}
	in.nextID = 0
	if in.lua != nil {
		in.lua.close()
		in.lua = nil
	}
}

// nowMs is the instance's clock in ms: frozen during a script, as Redis's is.
func (in *Instance) nowMs() int64 {
	if in.frozen != 0 {
		return in.frozen
	}
	return time.Now().Add(in.offset).UnixMilli()
}

// newSession numbers a new connection.
func (in *Instance) newSession() *session {
	in.nextID++
	return &session{id: in.nextID, proto: 2}
}

// lookup returns a live key of db, deleting it first if it has expired (Redis
// expires a key once its time is strictly past).
func (in *Instance) lookup(db int, key string) *entry {
	e := in.dbs[db][key]
	if e != nil && e.expireAt != 0 && in.nowMs() > e.expireAt {
		delete(in.dbs[db], key)
		return nil
	}
	return e
}

// Keys returns the live keys of database 0 with their values and remaining TTL
// (-1 for none), sorted by key, for checks and traces.
func (in *Instance) Keys() []KeyInfo {
	var out []KeyInfo
	for k := range in.dbs[0] {
		if e := in.lookup(0, k); e != nil {
			ttl := time.Duration(-1)
			if e.expireAt != 0 {
				ttl = time.Duration(e.expireAt-in.nowMs()) * time.Millisecond
			}
			out = append(out, KeyInfo{Key: k, Value: e.val, TTL: ttl})
		}
	}
	sortKeys(out)
	return out
}

// KeyInfo is a live key of an instance.
type KeyInfo struct {
	Key, Value string
	// TTL is the time left, or -1 when the key has no expiry.
	TTL time.Duration
	// at is the expiry in ms of the instance's clock, 0 for none.
	at int64
}

// same reports whether two looks at a key saw the same write.
func (k KeyInfo) same(o KeyInfo) bool { return k.Key == o.Key && k.Value == o.Value && k.at == o.at }

func sortKeys(ks []KeyInfo) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j].Key < ks[j-1].Key; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
}

// command is one command of the table: its arity as Redis counts it (n exactly, or
// at least -n) and its function.
type command struct {
	arity int
	run   func(in *Instance, s *session, args []string) reply
}

// commands is the command table, written once.
var commands map[string]command

func init() {
	commands = map[string]command{
		"get": {2, cmdGet}, "set": {-3, cmdSet}, "del": {-2, cmdDel}, "exists": {-2, cmdExists},
		"pexpire": {-3, cmdPExpire}, "expire": {-3, cmdExpire}, "pttl": {2, cmdPTTL}, "ttl": {2, cmdTTL},
		"incr": {2, cmdIncr}, "client": {-2, cmdClient}, "eval": {-3, cmdEval}, "evalsha": {-3, cmdEvalSha},
		"script": {-2, cmdScript}, "wait": {3, cmdWait}, "ping": {-1, cmdPing}, "select": {2, cmdSelect},
		"hello": {-1, cmdHello}, "echo": {2, cmdEcho},
		"mset": {-3, cmdMSet}, "msetnx": {-3, cmdMSetNX}, "mget": {-2, cmdMGet}, "getrange": {4, cmdGetRange},
	}
}

// exec runs one command for session s.
func (in *Instance) exec(s *session, args []string) reply {
	if len(args) == 0 {
		return reply{}
	}
	name := strings.ToLower(args[0])
	cmd, ok := commands[name]
	if !ok {
		return unknownCommand(args)
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		return errorf("ERR wrong number of arguments for '%s' command", name)
	}
	return cmd.run(in, s, args)
}

// unknownCommand is Redis's reply to a command it does not have: the name, then the
// arguments, each quoted, while they fit in 128 bytes.
func unknownCommand(args []string) reply {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		b.WriteString("'" + clip(a, 128-b.Len()) + "' ")
	}
	return errorf("ERR unknown command '%s', with args beginning with: %s", clip(args[0], 128), b.String())
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// parseInt parses a Redis integer argument.
func parseInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && (len(s) == 1 || s[0] != '0') && s != "-0" && !strings.HasPrefix(s, "+")
}

func cmdGet(in *Instance, s *session, args []string) reply {
	if e := in.lookup(s.db, args[1]); e != nil {
		return bulk(e.val)
	}
	return nilReply
}

func cmdDel(in *Instance, s *session, args []string) reply {
	n := 0
	for _, k := range args[1:] {
		if in.lookup(s.db, k) != nil {
			delete(in.dbs[s.db], k)
			n++
		}
	}
	return integer(int64(n))
}

func cmdExists(in *Instance, s *session, args []string) reply {
	n := 0
	for _, k := range args[1:] {
		if in.lookup(s.db, k) != nil {
			n++
		}
	}
	return integer(int64(n))
}

func cmdIncr(in *Instance, s *session, args []string) reply {
	var n int64
	e := in.lookup(s.db, args[1])
	if e != nil {
		var ok bool
		if n, ok = parseInt(e.val); !ok || len(e.val) > 20 {
			return errNotInt
		}
	}
	if n == 1<<63-1 {
		return errorf("ERR increment or decrement would overflow")
	}
	n++
	if e == nil {
		e = &entry{}
		in.dbs[s.db][args[1]] = e
	}
	e.val = strconv.FormatInt(n, 10)
	return integer(n)
}

func cmdEcho(_ *Instance, _ *session, args []string) reply { return bulk(args[1]) }

func cmdPing(_ *Instance, _ *session, args []string) reply {
	switch len(args) {
	case 1:
		return status("PONG")
	case 2:
		return bulk(args[1])
	}
	return errorf("ERR wrong number of arguments for 'ping' command")
}

func cmdSelect(_ *Instance, s *session, args []string) reply {
	n, ok := parseInt(args[1])
	switch {
	case !ok || n < -1<<31 || n > 1<<31-1:
		return errNotInt
	case n < 0 || n >= numDBs:
		return errorf("ERR DB index is out of range")
	}
	s.db = int(n)
	return okReply
}

func cmdWait(_ *Instance, _ *session, args []string) reply {
	if _, ok := parseInt(args[1]); !ok {
		return errNotInt
	}
	t, ok := parseInt(args[2])
	switch {
	case !ok:
		return errorf("ERR timeout is not an integer or out of range")
	case t < 0:
		return errorf("ERR timeout is negative")
	}
	return integer(0)
}

// restart empties the instance as a restart without persistence does; its clock
// is the machine's, kept.
func (in *Instance) restart() {
	in.starts++
	in.reset()
}

// epoch counts the instance's restarts: a connection's session is of one epoch.
func (in *Instance) epoch() int { return in.starts }
