package zksim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"pgregory.net/rapid"
)

// The differential test: the same request streams, sent by go-zookeeper to the wire
// simulator and to a real ZooKeeper (the standalone server scripts/with-zk.sh starts),
// must get the same replies and watch events, field by field: paths, data, errors,
// and every stat field but the times (zxids relative to the stream's first write,
// ephemeral owners as "this session"). A simulator bug must not pass for a recipe
// bug; what the simulator leaves out on purpose is listed in docs/zksim.md.

// diffOp is one request of a stream.
type diffOp struct {
	kind    string
	path    string
	data    []byte
	flags   int32
	version int32
	watch   bool
	sub     []diffOp // a multi's operations
}

func (o diffOp) String() string {
	if o.kind == "multi" {
		parts := make([]string, len(o.sub))
		for i, s := range o.sub {
			parts[i] = s.String()
		}
		return "multi[" + strings.Join(parts, "; ") + "]"
	}
	return fmt.Sprintf("%s %s f%d v%d w%v %q", o.kind, o.path, o.flags, o.version, o.watch, o.data)
}

// diffSide is one end of the comparison: a connection, its session, the zxid of
// the stream's first write, and the watches its requests left.
type diffSide struct {
	conn    *zk.Conn
	root    string
	base    int64
	watches []<-chan zk.Event
	labels  []string
}

// norm renders a stat with zxids relative to the stream's base and the owner as
// "self" or 0.
func (d *diffSide) norm(st *zk.Stat) string {
	if st == nil {
		return "nil"
	}
	z := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		return v - d.base
	}
	owner := "0"
	if st.EphemeralOwner != 0 {
		owner = "self"
		if st.EphemeralOwner != d.conn.SessionID() {
			owner = "other"
		}
	}
	return fmt.Sprintf("{cz %d mz %d pz %d v %d cv %d av %d own %s len %d kids %d}",
		z(st.Czxid), z(st.Mzxid), z(st.Pzxid), st.Version, st.Cversion, st.Aversion, owner, st.DataLength, st.NumChildren)
}

// do sends op and renders its outcome, and any watch events that arrived with it.
func (d *diffSide) do(op diffOp) string {
	p := d.root + op.path
	acl := zk.WorldACL(zk.PermAll)
	var out string
	var ch <-chan zk.Event
	switch op.kind {
	case "create":
		got, err := d.conn.Create(p, op.data, op.flags, acl)
		out = fmt.Sprintf("%s %v", strings.TrimPrefix(got, d.root), err)
	case "container":
		got, err := d.conn.CreateContainer(p, op.data, zk.FlagContainer, acl)
		out = fmt.Sprintf("%s %v", strings.TrimPrefix(got, d.root), err)
	case "ttl":
		got, err := d.conn.CreateTTL(p, op.data, zk.FlagTTL, acl, time.Minute)
		out = fmt.Sprintf("%s %v", strings.TrimPrefix(got, d.root), err)
	case "delete":
		out = fmt.Sprint(d.conn.Delete(p, op.version))
	case "exists":
		var ok bool
		var st *zk.Stat
		var err error
		if op.watch {
			ok, st, ch, err = d.conn.ExistsW(p)
		} else {
			ok, st, err = d.conn.Exists(p)
		}
		out = fmt.Sprintf("%v %s %v", ok, d.norm(st), err)
	case "get":
		var data []byte
		var st *zk.Stat
		var err error
		if op.watch {
			data, st, ch, err = d.conn.GetW(p)
		} else {
			data, st, err = d.conn.Get(p)
		}
		out = fmt.Sprintf("%q %s %v", data, d.norm(st), err)
	case "set":
		st, err := d.conn.Set(p, op.data, op.version)
		out = fmt.Sprintf("%s %v", d.norm(st), err)
	case "children":
		var kids []string
		var st *zk.Stat
		var err error
		if op.watch {
			kids, st, ch, err = d.conn.ChildrenW(p)
		} else {
			kids, st, err = d.conn.Children(p)
		}
		slices.Sort(kids) // ZooKeeper's order is unspecified
		out = fmt.Sprintf("%v %s %v", kids, d.norm(st), err)
	case "sync":
		got, err := d.conn.Sync(p)
		out = fmt.Sprintf("%s %v", strings.TrimPrefix(got, d.root), err)
	case "multi":
		var ops []any
		for _, s := range op.sub {
			sp := d.root + s.path
			switch s.kind {
			case "create":
				ops = append(ops, &zk.CreateRequest{Path: sp, Data: s.data, Acl: acl, Flags: s.flags})
			case "delete":
				ops = append(ops, &zk.DeleteRequest{Path: sp, Version: s.version})
			case "set":
				ops = append(ops, &zk.SetDataRequest{Path: sp, Data: s.data, Version: s.version})
			case "check":
				ops = append(ops, &zk.CheckVersionRequest{Path: sp, Version: s.version})
			}
		}
		res, err := d.conn.Multi(ops...)
		parts := []string{fmt.Sprint(err)}
		for _, r := range res {
			parts = append(parts, fmt.Sprintf("(%s %s %v)", strings.TrimPrefix(r.String, d.root), d.norm(r.Stat), r.Error))
		}
		out = strings.Join(parts, " ")
	}
	if ch != nil {
		d.watches = append(d.watches, ch)
		d.labels = append(d.labels, op.kind+" "+op.path)
	}
	return out + d.events()
}

// events renders, and forgets, the watch events that have arrived.
func (d *diffSide) events() string {
	var out []string
	for i := 0; i < len(d.watches); i++ {
		select {
		case ev := <-d.watches[i]:
			out = append(out, fmt.Sprintf("%s: %v %s", d.labels[i], ev.Type, strings.TrimPrefix(ev.Path, d.root)))
			d.watches = slices.Delete(d.watches, i, i+1)
			d.labels = slices.Delete(d.labels, i, i+1)
			i--
		default:
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " events " + strings.Join(out, ", ")
}

// diffPaths are the paths a generated stream uses, under its root.
var diffPaths = []string{"/a", "/a/b", "/a/c", "/b", "/a/b/c"}

// genOp draws one request of a generated stream.
func genOp(t *rapid.T, inMulti bool) diffOp {
	kinds := []string{"create", "container", "ttl", "delete", "exists", "get", "set", "children", "sync", "multi"}
	if inMulti {
		kinds = []string{"create", "delete", "set", "check"}
	}
	op := diffOp{
		kind:    rapid.SampledFrom(kinds).Draw(t, "kind"),
		path:    rapid.SampledFrom(diffPaths).Draw(t, "path"),
		version: rapid.Int32Range(-1, 2).Draw(t, "version"),
		watch:   rapid.Bool().Draw(t, "watch"),
	}
	switch op.kind {
	case "create":
		op.flags = rapid.SampledFrom([]int32{0, zk.FlagEphemeral, zk.FlagSequence, zk.FlagEphemeral | zk.FlagSequence}).Draw(t, "flags")
		op.data = []byte(rapid.StringOfN(rapid.RuneFrom([]rune("xyz")), 0, 3, -1).Draw(t, "data"))
	case "set":
		op.data = []byte(rapid.StringOfN(rapid.RuneFrom([]rune("xyz")), 0, 3, -1).Draw(t, "data"))
	case "multi":
		n := rapid.IntRange(1, 3).Draw(t, "ops")
		for range n {
			op.sub = append(op.sub, genOp(t, true))
		}
	}
	return op
}

// recipeStream is the requests of a lock recipe's cycle (go-zookeeper's zk.Lock and
// zlc-mutex's shapes): parents, a protected ephemeral sequential node, the queue,
// a watch on the predecessor, a fenced write, the release and the watch it fires.
func recipeStream() []diffOp {
	return []diffOp{
		{kind: "exists", path: "/a"},
		{kind: "create", path: "/a"},
		{kind: "create", path: "/a/b", flags: zk.FlagEphemeral | zk.FlagSequence},
		{kind: "create", path: "/a/c", flags: zk.FlagEphemeral | zk.FlagSequence},
		{kind: "children", path: "/a", watch: true},
		{kind: "get", path: "/a/b0000000000", watch: true},
		{kind: "exists", path: "/a/b0000000000", watch: true},
		{kind: "multi", sub: []diffOp{{kind: "check", path: "/a/b0000000000", version: 0}, {kind: "set", path: "/a", data: []byte("1"), version: -1}}},
		{kind: "multi", sub: []diffOp{{kind: "check", path: "/a/b0000000000", version: 3}, {kind: "set", path: "/a", data: []byte("2"), version: -1}}},
		{kind: "sync", path: "/a"},
		{kind: "delete", path: "/a/b0000000000", version: -1},
		{kind: "children", path: "/a", watch: true},
		{kind: "delete", path: "/a/c0000000001", version: 0},
		{kind: "container", path: "/b"},
		{kind: "create", path: "/b/c", flags: zk.FlagEphemeral},
		{kind: "delete", path: "/a", version: -1},
	}
}

// compareStream sends ops to the real server on real (under a fresh root), then to a
// new simulator (in a bubble, which the real connection must stay out of), and
// returns the first difference, or "".
func compareStream(t *testing.T, real *zk.Conn, root string, ops []diffOp) string {
	if _, err := real.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("real ZooKeeper: create %s: %v", root, err)
	}
	_, st, err := real.Exists(root)
	if err != nil {
		t.Fatal(err)
	}
	realSide := &diffSide{conn: real, root: root, base: st.Czxid}
	want := make([]string, len(ops))
	for i, op := range ops {
		want[i] = realSide.do(op)
	}
	var diff string
	synctest.Test(t, func(t *testing.T) {
		s := NewWire()
		c, conn := connectWire(t, s, "diff")
		defer func() {
			go conn.Close()
			s.Settle()
		}()
		call := func(f func() string) string {
			done := make(chan string, 1)
			go func() { done <- f() }()
			s.Settle()
			for s.CanRun(c) {
				if _, err := s.Run(c); err != nil {
					t.Fatal(err)
				}
			}
			return <-done
		}
		parts := strings.Split(root[1:], "/")
		for i := range parts {
			p := "/" + strings.Join(parts[:i+1], "/")
			call(func() string { _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); return fmt.Sprint(err) })
		}
		sim := &diffSide{conn: conn, root: root, base: s.Zxid()}
		for i, op := range ops {
			if got := call(func() string { return sim.do(op) }); seqMasked(got) != seqMasked(want[i]) {
				diff = fmt.Sprintf("request %d, %v:\n  ZooKeeper: %s\n  simulator: %s", i+1, op, want[i], got)
				return
			}
		}
	})
	return diff
}

// TestWireMatchesZooKeeper compares the simulator with a real ZooKeeper on the lock
// recipes' request stream and on generated ones.
func TestWireMatchesZooKeeper(t *testing.T) {
	servers := testenv.ZKServers(t)
	real, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	prefix := fmt.Sprintf("/zlcdiff-%d", time.Now().UnixNano())
	if _, err := real.Create(prefix, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	n := 0
	root := func() string { n++; return fmt.Sprintf("%s/s%d", prefix, n) }
	if d := compareStream(t, real, root(), recipeStream()); d != "" {
		t.Fatalf("the recipes' stream: %s", d)
	}
	rapid.Check(t, func(rt *rapid.T) {
		ops := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) diffOp { return genOp(t, false) }), 1, 30).Draw(rt, "ops")
		if d := compareStream(t, real, root(), ops); d != "" {
			rt.Fatalf("a generated stream: %s", d)
		}
	})
}

// seqRE matches a sequential node's ten-digit number.
var seqRE = regexp.MustCompile(`[0-9]{10}`)

// seqMasked hides sequence numbers. After a child of a parent is deleted, a real
// server may number the parent's next sequential child one lower than the
// simulator (ZooKeeper takes the parent's cversion from its pending change records,
// which a delete does not bump, when they are still cached): a known difference
// (docs/property-testing.md). Every other field, the parent's cversion included,
// is compared.
func seqMasked(s string) string { return seqRE.ReplaceAllString(s, "<seq>") }
