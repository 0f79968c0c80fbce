package sqldb

import "slices"

// A database lock's entries, as both kinds' lock readers (dbinspect.go,
// dbinspectmariadb.go) read them from every server and name them.

// dbLockEntry is one entry of a database lock: its name and the session owning it.
type dbLockEntry struct {
	name, owner string
	waiting     bool // a waiter, not a holder
}

// holdersFirst orders entries read from several servers: every holder, then every
// waiter, each server's order kept.
func holdersFirst(entries []dbLockEntry) []dbLockEntry {
	slices.SortStableFunc(entries, func(a, b dbLockEntry) int {
		switch {
		case a.waiting == b.waiting:
			return 0
		case b.waiting:
			return -1
		}
		return 1
	})
	return entries
}

// entryNames are the entries' names.
func entryNames(es []dbLockEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

// entryOwner is the owner of the entry called name among es (false: none), or err.
func entryOwner(es []dbLockEntry, name string, err error) (string, bool, error) {
	if err != nil {
		return "", false, err
	}
	for _, e := range es {
		if e.name == name {
			return e.owner, true, nil
		}
	}
	return "", false, nil
}
