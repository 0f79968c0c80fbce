package zksim

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ZooKeeper's client protocol, as far as the wire mode speaks it: every packet is a
// 4-byte big-endian length and a jute record (zookeeper.jute): int and long
// big-endian, boolean one byte, buffer and ustring an int length (-1 for null) and
// the bytes, vector an int count and the items.

// Opcodes (ZooDefs.OpCode).
const (
	opCreate          int32 = 1
	opDelete          int32 = 2
	opExists          int32 = 3
	opGetData         int32 = 4
	opSetData         int32 = 5
	opGetChildren     int32 = 8
	opSync            int32 = 9
	opPing            int32 = 11
	opGetChildren2    int32 = 12
	opCheck           int32 = 13
	opMulti           int32 = 14
	opCreate2         int32 = 15
	opCheckWatches    int32 = 17
	opRemoveWatches   int32 = 18
	opCreateContainer int32 = 19
	opCreateTTL       int32 = 21
	opClose           int32 = -11
	opSetAuth         int32 = 100
	opSetWatches      int32 = 101
	opSetWatches2     int32 = 105
	opMultiError      int32 = -1
)

// Special xids (ClientCnxn): a watch event, a ping, an auth packet, setWatches.
const (
	xidNotification int32 = -1
	xidPing         int32 = -2
)

// Error codes (KeeperException.Code) the simulator answers with.
const (
	codeOK                      int32 = 0
	codeRuntimeInconsistency    int32 = -2
	codeMarshallingError        int32 = -5
	codeUnimplemented           int32 = -6
	codeBadArguments            int32 = -8
	codeNoNode                  int32 = -101
	codeBadVersion              int32 = -103
	codeNoChildrenForEphemerals int32 = -108
	codeNodeExists              int32 = -110
	codeNotEmpty                int32 = -111
	codeNoWatcher               int32 = -121
)

// Create flags on the wire (CreateMode): ephemeral 1, sequential 2, container 4,
// persistent with TTL 5, persistent sequential with TTL 6.
const (
	wireEphemeral  int32 = 1
	wireSequential int32 = 2
	wireContainer  int32 = 4
)

// Watch event states: SyncConnected.
const stateSyncConnected int32 = 3

// juteWriter appends jute values to a buffer.
type juteWriter struct{ b []byte }

func (w *juteWriter) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *juteWriter) int64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }

func (w *juteWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *juteWriter) buffer(v []byte) {
	if v == nil {
		w.int32(-1)
		return
	}
	w.int32(int32(len(v)))
	w.b = append(w.b, v...)
}

func (w *juteWriter) string(v string) {
	w.int32(int32(len(v)))
	w.b = append(w.b, v...)
}

func (w *juteWriter) strings(v []string) {
	w.int32(int32(len(v)))
	for _, s := range v {
		w.string(s)
	}
}

// stat writes a Stat record; the simulation has no clock, so ctime and mtime are 0
// and aversion (ACLs are not simulated) is 0.
func (w *juteWriter) stat(s Stat) {
	w.int64(s.Czxid)
	w.int64(s.Mzxid)
	w.int64(0) // ctime
	w.int64(0) // mtime
	w.int32(s.Version)
	w.int32(s.Cversion)
	w.int32(0) // aversion
	w.int64(s.EphemeralOwner)
	w.int32(s.DataLength)
	w.int32(s.NumChildren)
	w.int64(s.Pzxid)
}

// packet frames the writer's record: its length, then the record.
func (w *juteWriter) packet() []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(w.b)), uint32(len(w.b)))
	return append(out, w.b...)
}

// errShort is a record that ends before its fields do.
var errShort = errors.New("record too short")

// juteReader reads jute values; the first error sticks and later reads return zero.
type juteReader struct {
	b   []byte
	err error
}

func (r *juteReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *juteReader) int32() int32 {
	if v := r.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *juteReader) int64() int64 {
	if v := r.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (r *juteReader) bool() bool {
	v := r.take(1)
	return v != nil && v[0] != 0
}

func (r *juteReader) buffer() []byte {
	n := r.int32()
	if n == -1 || r.err != nil {
		return nil
	}
	return append([]byte{}, r.take(int(n))...)
}

func (r *juteReader) string() string { return string(r.buffer()) }

func (r *juteReader) strings() []string {
	n := r.int32()
	if n < 0 || r.err != nil {
		return nil
	}
	if int(n) > len(r.b)/4 {
		r.err = fmt.Errorf("vector of %d strings in %d bytes", n, len(r.b))
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.string())
	}
	return out
}

// acls reads and discards a vector of ACL records (ACLs are not simulated).
func (r *juteReader) acls() {
	n := r.int32()
	if n < 0 || int(n) > len(r.b)/12 {
		if n > 0 {
			r.err = fmt.Errorf("vector of %d ACLs in %d bytes", n, len(r.b))
		}
		return
	}
	for range n {
		r.int32()  // perms
		r.string() // scheme
		r.string() // id
	}
}

// connectRequest is ConnectRequest, with the read-only byte newer clients send.
type connectRequest struct {
	protocolVersion int32
	lastZxidSeen    int64
	timeout         int32
	sessionID       int64
	passwd          []byte
	// readOnly is nil when the client sent no read-only byte (go-zookeeper).
	readOnly *bool
}

func decodeConnect(b []byte) (connectRequest, error) {
	r := juteReader{b: b}
	c := connectRequest{
		protocolVersion: r.int32(),
		lastZxidSeen:    r.int64(),
		timeout:         r.int32(),
		sessionID:       r.int64(),
		passwd:          r.buffer(),
	}
	if r.err == nil && len(r.b) > 0 {
		ro := r.bool()
		c.readOnly = &ro
	}
	return c, r.err
}

// connectResponse encodes ConnectResponse, echoing the read-only byte when the
// request had one.
func connectResponse(timeout int32, sid int64, passwd []byte, readOnly *bool) []byte {
	var w juteWriter
	w.int32(0)
	w.int32(timeout)
	w.int64(sid)
	w.buffer(passwd)
	if readOnly != nil {
		w.bool(false)
	}
	return w.packet()
}

// replyHeader starts a reply: xid, zxid, err.
func replyHeader(xid int32, zxid int64, code int32) *juteWriter {
	w := &juteWriter{}
	w.int32(xid)
	w.int64(zxid)
	w.int32(code)
	return w
}

// watchEvent encodes a watch notification.
func watchEvent(typ int32, path string) []byte {
	w := replyHeader(xidNotification, -1, codeOK)
	w.int32(typ)
	w.int32(stateSyncConnected)
	w.string(path)
	return w.packet()
}
