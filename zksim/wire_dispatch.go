package zksim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// wireReq is what a request that came over the wire carries beyond an in-process
// one: its xid and opcode (the reply's shape), and the fields of the opcodes the
// in-process client never sends.
type wireReq struct {
	xid int32
	op  int32
	// code, when not codeOK, answers the request whatever the tree holds: an opcode
	// the simulator does not implement, or a record it could not decode (why says
	// which).
	code int32
	why  string
	// setWatches: the client's last zxid and its watches by kind.
	rel                 int64
	data, exist, childs []string
	// checkWatches and removeWatches: the watch type (1 children, 2 data, 3 any).
	wtype int32
	// multi's operations.
	txn []txnOp
}

// decodeRequest turns a request packet (after its header) into a request.
func decodeRequest(xid, op int32, body []byte) *request {
	w := &wireReq{xid: xid, op: op}
	r := &request{wire: w}
	in := juteReader{b: body}
	switch op {
	case opCreate, opCreate2, opCreateContainer:
		t := decodeCreate(&in, op)
		r.kind, r.path, r.data, r.flags, r.container = reqCreate, t.path, t.data, t.flags, t.container
		if t.ttl {
			r.kind, w.code, w.why = reqFixed, codeUnimplemented, "TTL nodes"
		}
	case opDelete:
		r.kind, r.path, r.version = reqDelete, in.string(), in.int32()
	case opExists, opGetData:
		r.kind, r.path, r.watch = reqGet, in.string(), in.bool()
		if op == opExists {
			r.kind = reqExists
		}
	case opSetData:
		r.kind, r.path, r.data, r.version = reqSet, in.string(), in.buffer(), in.int32()
	case opGetChildren, opGetChildren2:
		r.kind, r.path, r.watch = reqChildren, in.string(), in.bool()
	case opSync:
		r.kind, r.path = reqSync, in.string()
	case opCheck:
		r.kind, r.path, r.version = reqCheck, in.string(), in.int32()
	case opMulti:
		r.kind = reqTxn
		w.txn = decodeMulti(&in)
	case opSetAuth:
		r.kind = reqAuth
		in.int32()  // type
		in.string() // scheme
		in.buffer() // auth
	case opSetWatches, opSetWatches2:
		r.kind = reqSetWatches
		w.rel, w.data, w.exist, w.childs = in.int64(), in.strings(), in.strings(), in.strings()
		if op == opSetWatches2 {
			persistent, recursive := in.strings(), in.strings()
			if len(persistent) > 0 || len(recursive) > 0 {
				w.code, w.why = codeUnimplemented, "persistent watches"
			}
		}
	case opCheckWatches, opRemoveWatches:
		r.kind, r.path, w.wtype = reqWatches, in.string(), in.int32()
	default:
		r.kind = reqFixed
		w.code, w.why = codeUnimplemented, fmt.Sprintf("opcode %d", op)
	}
	if in.err != nil && w.code == codeOK {
		r.kind = reqFixed
		w.code, w.why = codeMarshallingError, fmt.Sprintf("opcode %d: %v", op, in.err)
	}
	return r
}

// txnOp is one operation of a multi.
type txnOp struct {
	op        int32
	path      string
	data      []byte
	flags     zlcmutex.CreateFlags
	container bool
	// ttl: a TTL node, which the simulator refuses (ZooKeeper does unless
	// extended types are enabled).
	ttl     bool
	version int32
}

func decodeCreate(in *juteReader, op int32) txnOp {
	t := txnOp{op: op, path: in.string(), data: in.buffer()}
	in.acls()
	mode := in.int32()
	t.ttl = mode > wireContainer || op == opCreateTTL
	if mode&wireEphemeral != 0 && mode < wireContainer {
		t.flags |= zlcmutex.FlagEphemeral
	}
	if mode&wireSequential != 0 && mode < wireContainer {
		t.flags |= zlcmutex.FlagSequential
	}
	t.container = mode == wireContainer || op == opCreateContainer
	return t
}

// decodeMulti reads a multi's operations: each a MultiHeader and its record, up to
// the header marked done.
func decodeMulti(in *juteReader) []txnOp {
	var ops []txnOp
	for in.err == nil {
		typ, done := in.int32(), in.bool()
		in.int32() // err
		if done {
			break
		}
		switch typ {
		case opCreate, opCreate2, opCreateContainer:
			ops = append(ops, decodeCreate(in, typ))
		case opDelete:
			ops = append(ops, txnOp{op: typ, path: in.string(), version: in.int32()})
		case opSetData:
			ops = append(ops, txnOp{op: typ, path: in.string(), data: in.buffer(), version: in.int32()})
		case opCheck:
			ops = append(ops, txnOp{op: typ, path: in.string(), version: in.int32()})
		default:
			in.err = fmt.Errorf("multi: operation type %d", typ)
		}
	}
	return ops
}

// errCode is the error code ZooKeeper answers err with.
func errCode(err error) int32 {
	switch {
	case err == nil:
		return codeOK
	case err == errBadArguments:
		return codeBadArguments
	case err == errNoChildrenForEphemerals:
		return codeNoChildrenForEphemerals
	case errors.Is(err, zlcmutex.ErrNoNode):
		return codeNoNode
	case errors.Is(err, zlcmutex.ErrNodeExists):
		return codeNodeExists
	case errors.Is(err, zlcmutex.ErrBadVersion):
		return codeBadVersion
	case errors.Is(err, zlcmutex.ErrNotEmpty):
		return codeNotEmpty
	case errors.Is(err, errNoWatcher):
		return codeNoWatcher
	}
	return codeRuntimeInconsistency
}

// errNoWatcher is ZooKeeper's NOWATCHER: checkWatches or removeWatches found none.
var errNoWatcher = errors.New("no watcher")

// encodeReply renders the reply to a wire request; zxid is the server's last zxid.
func encodeReply(r *request, rep reply, zxid int64) []byte {
	w := r.wire
	code := w.code
	if code == codeOK {
		code = errCode(rep.err)
	}
	if r.kind == reqExists && code == codeOK && !rep.exists {
		code = codeNoNode
	}
	if r.kind == reqTxn && rep.results != nil {
		// A multi's reply header says ok even when it failed: its results say how
		// (ZooKeeper's FinalRequestProcessor; go-zookeeper takes the first error).
		out := replyHeader(w.xid, zxid, codeOK)
		encodeResults(out, w.txn, rep.results)
		return out.packet()
	}
	out := replyHeader(w.xid, zxid, code)
	if code != codeOK {
		return out.packet()
	}
	switch w.op {
	case opCreate, opCreateContainer:
		out.string(rep.path)
	case opCreate2:
		out.string(rep.path)
		out.stat(rep.stat)
	case opExists, opSetData:
		out.stat(rep.stat)
	case opGetData:
		out.buffer(rep.data)
		out.stat(rep.stat)
	case opGetChildren:
		out.strings(rep.children)
	case opGetChildren2:
		out.strings(rep.children)
		out.stat(rep.stat)
	case opSync:
		out.string(r.path)
	}
	return out.packet()
}

// encodeResults writes a multi's results: a MultiHeader and a record per operation,
// then the header marked done.
func encodeResults(out *juteWriter, ops []txnOp, res []txnResult) {
	for i, t := range res {
		typ := ops[i].op
		if t.code != codeOK || t.failed {
			typ = opMultiError
		}
		out.int32(typ)
		out.bool(false)
		out.int32(t.code)
		switch {
		case typ == opMultiError:
			out.int32(t.code)
		case typ == opCreate || typ == opCreateContainer:
			out.string(t.path)
		case typ == opCreate2:
			out.string(t.path)
			out.stat(t.stat)
		case typ == opSetData:
			out.stat(t.stat)
		}
	}
	out.int32(-1)
	out.bool(true)
	out.int32(-1)
}

// describeWire renders a wire request for a trace: opcode, path, watch.
func describeWire(r *request) string {
	w := r.wire
	switch r.kind {
	case reqTxn:
		parts := make([]string, len(w.txn))
		for i, t := range w.txn {
			parts[i] = fmt.Sprintf("%s %s", opName(t.op), t.path)
			if t.op == opCheck || t.op == opSetData || t.op == opDelete {
				parts[i] += fmt.Sprintf(" v%d", t.version)
			}
		}
		return "multi [" + strings.Join(parts, "; ") + "]"
	case reqSetWatches:
		return fmt.Sprintf("setWatches zxid %d data %v exist %v child %v", w.rel, w.data, w.exist, w.childs)
	case reqFixed:
		return fmt.Sprintf("%s (%s)", opName(w.op), w.why)
	case reqWatches, reqCheck, reqAuth:
		return strings.TrimSpace(opName(w.op) + " " + r.path)
	}
	s := r.plain()
	return opName(w.op) + strings.TrimPrefix(s, strings.Fields(s)[0])
}

// opName names an opcode as ZooKeeper's ZooDefs do.
func opName(op int32) string {
	names := map[int32]string{
		opCreate: "create", opDelete: "delete", opExists: "exists", opGetData: "getData",
		opSetData: "setData", opGetChildren: "getChildren", opSync: "sync", opPing: "ping",
		opGetChildren2: "getChildren2", opCheck: "check", opMulti: "multi", opCreate2: "create2",
		opCheckWatches: "checkWatches", opRemoveWatches: "removeWatches",
		opCreateContainer: "createContainer", opCreateTTL: "createTTL", opClose: "close",
		opSetAuth: "setAuth", opSetWatches: "setWatches", opSetWatches2: "setWatches2",
	}
	if n, ok := names[op]; ok {
		return n
	}
	return fmt.Sprintf("op%d", op)
}

// applyWire performs the requests only the wire client sends. Under mu.
func (s *Sim) applyWire(c *Client, r *request) reply {
	w := r.wire
	switch r.kind {
	case reqFixed:
		return reply{}
	case reqAuth:
		return reply{}
	case reqCheck:
		n, ok := s.srv.nodes[r.path]
		switch {
		case !validPath(r.path):
			return reply{err: errBadArguments}
		case !ok:
			return reply{err: zlcmutex.ErrNoNode}
		case r.version != -1 && r.version != n.stat.Version:
			return reply{err: zlcmutex.ErrBadVersion}
		}
		return reply{}
	case reqTxn:
		res, err := s.srv.txn(c.sess.ID, w.txn)
		return reply{results: res, err: err}
	case reqSetWatches:
		s.srv.setWatches(c, c.sess.ID, w.rel, w.data, w.exist, w.childs)
		return reply{}
	case reqWatches:
		return reply{err: s.srv.checkWatches(c, r.path, w.wtype, w.op == opRemoveWatches)}
	}
	return reply{err: errBadArguments}
}

// sortedUnique is names sorted, without repeats: a client library's watch table
// may come in map order, which must not decide anything.
func sortedUnique(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}
