package lockservice

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// LockReader reads a lock's entries over one session of the harness's own: the
// liveness verdict reads them once, the orphan watch every quarter second.
type LockReader interface {
	// Entries are the names of the lock's entries in queue order, lowest first;
	// fresh asks the service for an up-to-date answer (ZooKeeper: sync first). A
	// lock with no entries (or none yet) has none.
	Entries(lock Lock, fresh bool) ([]string, error)
	// Owner is the session that owns the entry ("0x0" for a persistent node);
	// false when the entry is gone.
	Owner(lock Lock, name string) (owner string, ok bool, err error)
	// Close ends the reader's session.
	Close()
}

// Lock names a lock for its readers: the path the run gave it, where this project's
// recipes keep it (a node's children, a key, a row, an advisory key or GET_LOCK name
// made from the path), and the places the workers' acquires said it lives
// (workloads.LockPlace): a library's own keys and values, advisory keys, GET_LOCK
// names. A reader reads both; what it cannot read of a place (a table of the
// worker's own) it leaves out.
type Lock struct {
	Path string
	// Places are the workers' latest places, one per worker at most.
	Places []workloads.LockPlace
	// Quorum, when set, are keys that hold the lock together, made from Path (a
	// RedLock over keys of one Redis Cluster, locknames.ClusterRedLockKeys): it is
	// held by the value more than half of them hold, and is one entry, named Path
	// (no key of that name is written).
	Quorum []string
}

// UnreadPlaces is a LockReader that cannot read some of the places workers name (a
// table of the worker's own): the run says so.
type UnreadPlaces interface {
	// Unread names each such place ("table app.locks"), once.
	Unread(lock Lock) []string
}

// UnreadTables names the places of lock in a table other than those the reader
// reads (readable), once each: the databases' UnreadPlaces.
func UnreadTables(lock Lock, readable ...string) []string {
	var out []string
	for _, p := range lock.Places {
		if w := "table " + p.Table; p.Table != "" && !slices.Contains(readable, p.Table) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// PathLock is the lock at path, with no place a worker named.
func PathLock(path string) Lock { return Lock{Path: path} }

// Keys are the Redis keys of the lock: the path, then each key a place names.
func (l Lock) Keys() []string {
	out := []string{l.Path}
	for _, p := range l.Places {
		for _, k := range p.Keys {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// OwnerOfValue is the session that holds a Redis key whose value is value: the
// session of the place that wrote it, or the value's own prefix (this project's
// recipes write "<session>:<random>").
func (l Lock) OwnerOfValue(key, value string) string {
	for _, p := range l.Places {
		if p.Value == value && p.Session != "" && slices.Contains(p.Keys, key) {
			return p.Session
		}
	}
	return OwnerOf(value)
}

// PersistentOwner is the owner of an entry no session owns (a persistent node).
const PersistentOwner = "0x0"

// SessionName is how a Redis client id is written as a session: 0x<hex>.
func SessionName(id uint64) string { return fmt.Sprintf("0x%x", id) }

// ParseSession reads a session id "0x<hex>" (false when s is not one).
func ParseSession(s string) (uint64, bool) {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok || hex == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	return n, err == nil
}

// OwnerOf is the session a lock value names: its prefix before the first ':' (the
// whole value when it has none).
func OwnerOf(value string) string {
	owner, _, _ := strings.Cut(value, ":")
	return owner
}

// OpTimeout bounds one exchange of the harness with an instance: a paused instance
// accepts the connection (the kernel does) but never answers.
const OpTimeout = time.Second
