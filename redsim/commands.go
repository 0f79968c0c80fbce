package redsim

import (
	"math"
	"strings"
)

// setOptions are SET's options, parsed.
type setOptions struct {
	nx, xx, get, keepTTL bool
	// expireAt is the absolute expiry in ms; 0 for none.
	expireAt int64
}

// parseSet parses SET's options (args from the fourth on) as Redis does: a
// conflicting or unknown option is a syntax error, a bad expiry its own error.
func (in *Instance) parseSet(args []string) (setOptions, reply) {
	var o setOptions
	var unit string
	var amount string
	for i := 0; i < len(args); i++ {
		switch opt := strings.ToUpper(args[i]); opt {
		case "NX":
			if o.xx {
				return o, errSyntax
			}
			o.nx = true
		case "XX":
			if o.nx {
				return o, errSyntax
			}
			o.xx = true
		case "GET":
			o.get = true
		case "KEEPTTL":
			if unit != "" {
				return o, errSyntax
			}
			o.keepTTL = true
		case "EX", "PX", "EXAT", "PXAT":
			if (unit != "" && unit != opt) || o.keepTTL || i+1 == len(args) {
				return o, errSyntax
			}
			unit, amount = opt, args[i+1]
			i++
		default:
			return o, errSyntax
		}
	}
	if unit == "" {
		return o, reply{}
	}
	n, ok := parseInt(amount)
	if !ok {
		return o, errNotInt
	}
	at, ok := in.absExpiry(n, unit)
	if !ok || n <= 0 {
		return o, errorf("ERR invalid expire time in 'set' command")
	}
	o.expireAt = at
	return o, reply{}
}

// absExpiry turns an amount in unit (EX, PX, EXAT, PXAT) into an absolute time in
// ms; false when it overflows.
func (in *Instance) absExpiry(n int64, unit string) (int64, bool) {
	if unit == "EX" || unit == "EXAT" {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return 0, false
		}
		n *= 1000
	}
	if unit == "EX" || unit == "PX" {
		now := in.nowMs()
		if n > math.MaxInt64-now {
			return 0, false
		}
		n += now
	}
	return n, true
}

func cmdSet(in *Instance, s *session, args []string) reply {
	o, bad := in.parseSet(args[3:])
	if bad.kind != 0 {
		return bad
	}
	key := args[1]
	old := in.lookup(s.db, key)
	prev := nilReply
	if old != nil {
		prev = bulk(old.val)
	}
	if (o.nx && old != nil) || (o.xx && old == nil) {
		if o.get {
			return prev
		}
		return nilReply
	}
	e := &entry{val: args[2], expireAt: o.expireAt}
	if o.keepTTL && old != nil {
		e.expireAt = old.expireAt
	}
	in.dbs[s.db][key] = e
	in.lookup(s.db, key) // an expiry already past deletes it
	if o.get {
		return prev
	}
	return okReply
}

func cmdPExpire(in *Instance, s *session, args []string) reply { return in.expire(s, args, "PX") }
func cmdExpire(in *Instance, s *session, args []string) reply  { return in.expire(s, args, "EX") }

// expire is PEXPIRE and EXPIRE with their NX, XX, GT and LT options.
func (in *Instance) expire(s *session, args []string, unit string) reply {
	var nx, xx, gt, lt bool
	for _, a := range args[3:] {
		switch strings.ToUpper(a) {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "GT":
			gt = true
		case "LT":
			lt = true
		default:
			return errorf("ERR Unsupported option %s", a)
		}
	}
	switch {
	case nx && (xx || gt || lt):
		return errorf("ERR NX and XX, GT or LT options at the same time are not compatible")
	case gt && lt:
		return errorf("ERR GT and LT options at the same time are not compatible")
	}
	n, ok := parseInt(args[2])
	if !ok {
		return errNotInt
	}
	at, ok := in.absExpiry(n, unit)
	if !ok {
		return errorf("ERR invalid expire time in '%s' command", strings.ToLower(args[0]))
	}
	e := in.lookup(s.db, args[1])
	if e == nil {
		return integer(0)
	}
	cur := e.expireAt
	switch {
	case nx && cur != 0, xx && cur == 0, gt && (cur == 0 || at <= cur), lt && cur != 0 && at >= cur:
		return integer(0)
	}
	if at <= in.nowMs() {
		delete(in.dbs[s.db], args[1])
		return integer(1)
	}
	e.expireAt = at
	return integer(1)
}

func cmdPTTL(in *Instance, s *session, args []string) reply { return in.ttl(s, args[1], true) }
func cmdTTL(in *Instance, s *session, args []string) reply  { return in.ttl(s, args[1], false) }

// ttl is PTTL (ms) and TTL (seconds, rounded to nearest): -2 for no key, -1 for no
// expiry.
func (in *Instance) ttl(s *session, key string, ms bool) reply {
	e := in.lookup(s.db, key)
	switch {
	case e == nil:
		return integer(-2)
	case e.expireAt == 0:
		return integer(-1)
	}
	left := max(e.expireAt-in.nowMs(), 0)
	if ms {
		return integer(left)
	}
	return integer((left + 500) / 1000)
}

// subcommand checks a container command's arity (n exactly, or at least -n) and
// returns Redis's error otherwise.
func subArity(args []string, n int) (reply, bool) {
	if (n > 0 && len(args) != n) || (n < 0 && len(args) < -n) {
		return errorf("ERR wrong number of arguments for '%s|%s' command",
			strings.ToLower(args[0]), strings.ToLower(args[1])), false
	}
	return reply{}, true
}

// unknownSub is Redis's reply to an unknown subcommand.
func unknownSub(args []string) reply {
	return errorf("ERR unknown subcommand '%s'. Try %s HELP.", clip(args[1], 128), strings.ToUpper(args[0]))
}

func cmdClient(_ *Instance, s *session, args []string) reply {
	arity := map[string]int{"id": 2, "getname": 2, "setname": 3, "setinfo": 4}
	sub := strings.ToLower(args[1])
	n, known := arity[sub]
	if !known {
		return unknownSub(args)
	}
	if r, ok := subArity(args, n); !ok {
		return r
	}
	switch sub {
	case "id":
		return integer(s.id)
	case "getname":
		if s.name == "" {
			return nilReply
		}
		return bulk(s.name)
	case "setname":
		if !printable(args[2]) {
			return errorf("ERR Client names cannot contain spaces, newlines or special characters.")
		}
		s.name = args[2]
		return okReply
	}
	// SETINFO (Redis 7.2): the library's name and version are accepted and kept
	// nowhere.
	switch attr := strings.ToLower(args[2]); {
	case attr != "lib-name" && attr != "lib-ver":
		return errorf("ERR Unrecognized option '%s'", args[2])
	case !printable(args[3]):
		return errorf("ERR %s cannot contain spaces, newlines or special characters.", attr)
	}
	return okReply
}

// printable reports whether s has no spaces, newlines or other special characters.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

func cmdHello(in *Instance, s *session, args []string) reply {
	proto := s.proto
	if len(args) > 1 {
		v, ok := parseInt(args[1])
		if !ok {
			return errorf("ERR Protocol version is not an integer or out of range")
		}
		if v < 2 || v > 3 {
			return errorf("NOPROTO unsupported protocol version")
		}
		proto = int(v)
	}
	name, setName := "", false
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToUpper(args[i]); {
		case opt == "AUTH" && i+2 < len(args):
			i += 2 // the default user has no password: any is accepted
		case opt == "SETNAME" && i+1 < len(args):
			name, setName = args[i+1], true
			if !printable(name) {
				return errorf("ERR Client names cannot contain spaces, newlines or special characters.")
			}
			i++
		default:
			return errorf("ERR Syntax error in HELLO option '%s'", args[i])
		}
	}
	s.proto = proto
	if setName {
		s.name = name
	}
	return reply{kind: mapReply, elems: []reply{
		bulk("server"), bulk("redis"), bulk("version"), bulk(Version), bulk("proto"), integer(int64(proto)),
		bulk("id"), integer(s.id), bulk("mode"), bulk("standalone"), bulk("role"), bulk("master"),
		bulk("modules"), array(),
	}}
}

// Version is the Redis version the simulator answers HELLO with: the one its
// differential test holds it to.
const Version = "7.0.15"

func cmdScript(in *Instance, _ *session, args []string) reply {
	switch strings.ToLower(args[1]) {
	case "load":
		if r, ok := subArity(args, 3); !ok {
			return r
		}
		sha := sha1hex(args[2])
		if _, err := in.engine().compile(sha, args[2]); err != nil {
			return compileError(err)
		}
		in.scripts[sha] = args[2]
		return bulk(sha)
	case "exists":
		if r, ok := subArity(args, -3); !ok {
			return r
		}
		out := make([]reply, len(args)-2)
		for i, sha := range args[2:] {
			_, ok := in.scripts[strings.ToLower(sha)]
			out[i] = integer(b2i(ok))
		}
		return array(out...)
	case "flush":
		if r, ok := subArity(args, -2); !ok {
			return r
		}
		in.scripts = map[string]string{}
		return okReply
	}
	return unknownSub(args)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func cmdEval(in *Instance, s *session, args []string) reply {
	sha := sha1hex(args[1])
	keys, argv, bad := scriptArgs(args)
	if bad.kind != 0 {
		return bad
	}
	in.scripts[sha] = args[1]
	return in.runScript(s, sha, args[1], keys, argv)
}

func cmdEvalSha(in *Instance, s *session, args []string) reply {
	sha := strings.ToLower(args[1])
	keys, argv, bad := scriptArgs(args)
	if bad.kind != 0 {
		return bad
	}
	src, ok := in.scripts[sha]
	if !ok {
		return errorf("NOSCRIPT No matching script. Please use EVAL.")
	}
	return in.runScript(s, sha, src, keys, argv)
}

// scriptArgs splits EVAL's arguments after the script into keys and arguments.
func scriptArgs(args []string) (keys, argv []string, bad reply) {
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		return nil, nil, errNotInt
	case n > int64(len(args)-3):
		return nil, nil, errorf("ERR Number of keys can't be greater than number of args")
	case n < 0:
		return nil, nil, errorf("ERR Number of keys can't be negative")
	}
	return args[3 : 3+n], args[3+n:], reply{}
}

// mset sets pairs of keys and values (MSET, and MSETNX when nx: only if none of
// the keys exists); every key loses its expiry.
func (in *Instance) mset(s *session, args []string, nx bool) reply {
	if len(args)%2 == 0 {
		return errorf("ERR wrong number of arguments for '%s' command", strings.ToLower(args[0]))
	}
	if nx {
		for i := 1; i < len(args); i += 2 {
			if in.lookup(s.db, args[i]) != nil {
				return integer(0)
			}
		}
	}
	for i := 1; i < len(args); i += 2 {
		in.dbs[s.db][args[i]] = &entry{val: args[i+1]}
	}
	if nx {
		return integer(1)
	}
	return okReply
}

func cmdMSet(in *Instance, s *session, args []string) reply   { return in.mset(s, args, false) }
func cmdMSetNX(in *Instance, s *session, args []string) reply { return in.mset(s, args, true) }

func cmdMGet(in *Instance, s *session, args []string) reply {
	out := make([]reply, len(args)-1)
	for i, k := range args[1:] {
		out[i] = nilReply
		if e := in.lookup(s.db, k); e != nil {
			out[i] = bulk(e.val)
		}
	}
	return array(out...)
}

// cmdGetRange is GETRANGE with Redis's rules for negative and out-of-range
// offsets.
func cmdGetRange(in *Instance, s *session, args []string) reply {
	start, ok1 := parseInt(args[2])
	end, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return errNotInt
	}
	var v string
	if e := in.lookup(s.db, args[1]); e != nil {
		v = e.val
	}
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		return bulk("")
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		return bulk("")
	}
	return bulk(v[start : end+1])
}
