package lockservice

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// LockReader reads a lock's entries over one session of the harness's own: the
// liveness verdict reads them once, the orphan watch every quarter second.
type LockReader interface {
	// Entries are the names of the lock's entries in queue order, lowest first;
	// fresh asks the service for an up-to-date answer (ZooKeeper: sync first). A
	// lock with no entries (or none yet) has none.
	Entries(lockPath string, fresh bool) ([]string, error)
	// Owner is the session that owns the entry ("0x0" for a persistent node);
	// false when the entry is gone.
	Owner(lockPath, name string) (owner string, ok bool, err error)
	// Close ends the reader's session.
	Close()
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
