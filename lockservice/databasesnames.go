package lockservice

import (
	"fmt"
	"hash/fnv"
)

// The names under which the database recipes lock, here so that the harness reads
// the very lock the workers take.

// PostgresAdvisoryKey is the advisory lock key of a lock name (pg-advisory locks
// pg_advisory_lock(key)): the name's 64-bit FNV-1a hash.
func PostgresAdvisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// MariaDBLockName is GET_LOCK's name for a lock path (mariadb-getlock): the path
// itself when it fits in 64 characters (MariaDB's limit), else "zlc-" and the
// path's 64-bit FNV-1a hash in hex.
func MariaDBLockName(path string) string {
	if len(path) <= 64 {
		return path
	}
	h := fnv.New64a()
	h.Write([]byte(path))
	return fmt.Sprintf("zlc-%016x", h.Sum64())
}
