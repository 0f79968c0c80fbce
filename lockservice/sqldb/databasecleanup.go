package sqldb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// A run's database servers live in its namespaces, so removing a dead run's
// namespaces (netns.CleanupAll) kills them; their directories stay. What else can be
// left: a server still running whose namespace is gone (it lives on, unnamed, as long
// as its processes do) or whose directory was deleted under it. FindLeftDatabases
// finds both, by the servers' working directories (every postgres and mariadbd
// process runs in its data directory, zlcpg-sN/data or zlcmariadb-sN/data), and the
// directories of dead runs by their record files (/run/<namespace>.zlcdb).

// LeftDatabase is a database server of a run that is gone.
type LeftDatabase struct {
	// Kind is kind.Postgres or kind.MariaDB.
	Kind kind.Name
	// Pids are its processes still running (none when only its directory is left).
	Pids []int
	// Dir is its directory (zlcpg-sN or zlcmariadb-sN); it may be gone already.
	Dir string
	// Namespace is the namespace its record names ("" without a record).
	Namespace string
}

// FindLeftDatabases lists the tool's database servers whose namespace is gone or
// whose directory was deleted, with their processes and directories, and the
// directories of servers whose namespace is gone (their record says which). A server
// in a namespace that still exists (a live run's), or in a directory whose record
// names one (a live run's setup), is never listed, nor is any postgres or mariadbd
// that does not run in a directory the tool made.
func FindLeftDatabases() ([]LeftDatabase, error) {
	live, err := lockservice.NewNSIndex()
	if err != nil {
		return nil, err
	}
	byDir := map[string]*LeftDatabase{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		l, ok := dbLayoutOf(pid)
		if !ok {
			continue
		}
		// Namespace before directory: a process that exits between the two reads
		// (a backend ending) then shows no namespace and is skipped, never taken
		// for one whose namespace was deleted.
		id := lockservice.NetnsOf(pid)
		dir, deleted, ok := ownDBDir(pid, l)
		if !ok || id == (lockservice.NSID{}) {
			continue
		}
		ns, liveNS, err := live.Lookup(id)
		if err != nil || !deleted && (liveNS || recordedLive(dir)) {
			continue
		}
		left := leftAt(byDir, dir, l.kind)
		left.Pids = append(left.Pids, pid)
		if liveNS {
			left.Namespace = ns
		}
	}
	addRecorded(byDir)
	out := make([]LeftDatabase, 0, len(byDir))
	for _, l := range byDir {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// recordedLive reports whether a record names dir as the directory of a server
// whose namespace exists: a live run's server, whose setup (mariadb-install-db,
// initdb) runs a server process in the host's own namespace. The records are read
// when asked: a run writes its record before it runs anything in the directory.
func recordedLive(dir string) bool {
	records, _ := filepath.Glob(filepath.Join(dbRecordDir, netns.Prefix+"*"+dbRecordSuffix))
	for _, r := range records {
		data, err := os.ReadFile(r)
		if err != nil || !netns.Exists(strings.TrimSuffix(filepath.Base(r), dbRecordSuffix)) {
			continue
		}
		rec := strings.TrimSpace(string(data))
		if real, err := filepath.EvalSymlinks(rec); err == nil {
			rec = real
		}
		if rec == dir {
			return true
		}
	}
	return false
}

// leftAt is byDir's entry for dir, made if new.
func leftAt(byDir map[string]*LeftDatabase, dir string, k kind.Name) *LeftDatabase {
	l := byDir[dir]
	if l == nil {
		l = &LeftDatabase{Kind: k, Dir: dir}
		byDir[dir] = l
	}
	return l
}

// addRecorded adds to byDir the servers whose record names a namespace that is gone.
func addRecorded(byDir map[string]*LeftDatabase) {
	records, _ := filepath.Glob(filepath.Join(dbRecordDir, netns.Prefix+"*"+dbRecordSuffix))
	for _, r := range records {
		ns := strings.TrimSuffix(filepath.Base(r), dbRecordSuffix)
		if netns.Exists(ns) {
			continue
		}
		data, err := os.ReadFile(r)
		if err != nil {
			continue
		}
		dir := strings.TrimSpace(string(data))
		dk := kind.Postgres // unless the directory's name is another kind's
		for _, l := range dbLayouts {
			if strings.HasPrefix(filepath.Base(dir), l.prefix) {
				dk = l.kind
			}
		}
		leftAt(byDir, dir, dk).Namespace = ns
	}
}

// CleanupDatabases kills what FindLeftDatabases lists, waits (up to 5 s) for it to
// go, and removes its directory and record. Call it after netns.CleanupAll: the
// namespaces that remain then are live runs'.
func CleanupDatabases() ([]LeftDatabase, error) {
	left, err := FindLeftDatabases()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, l := range left {
		for _, pid := range l.Pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range left {
		for _, pid := range l.Pids {
			for lockservice.Running(pid) && isDBServer(pid) {
				if time.Now().After(deadline) {
					errs = append(errs, fmt.Errorf("%s %d (%s) outlived SIGKILL for 5s", l.Kind, pid, l.Dir))
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// removeLeftSegment finds nothing of MariaDB's (no postmaster.pid).
		errs = append(errs, removeLeftSegment(filepath.Join(l.Dir, "data")), removeDBDir(l.Namespace, l.Dir))
	}
	return left, errors.Join(errs...)
}

// dbLayouts are the database kinds' layouts: what the sweep looks for.
var dbLayouts = []dbLayout{pgLayout, mariadbLayout}

// dbLayoutOf is the layout of the kind of database server process pid is (by its
// command name); false for any other process.
func dbLayoutOf(pid int) (dbLayout, bool) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return dbLayout{}, false
	}
	for _, l := range dbLayouts {
		if slices.Contains(l.comms, strings.TrimSpace(string(comm))) {
			return l, true
		}
	}
	return dbLayout{}, false
}

// isDBServer reports whether process pid is a database server.
func isDBServer(pid int) bool {
	_, ok := dbLayoutOf(pid)
	return ok
}

// ownDBDir is the tool's server directory that process pid, a server laid out as l,
// runs in: its working directory is data/ in a directory named with l's prefix and a
// number whose configuration (l.conf) starts with dbMarker, or such a directory that
// was deleted (then the configuration cannot be read; its name is all there is).
func ownDBDir(pid int, l dbLayout) (dir string, deleted, ok bool) {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return "", false, false
	}
	cwd, deleted = strings.CutSuffix(cwd, " (deleted)")
	dir = filepath.Dir(cwd)
	n, found := strings.CutPrefix(filepath.Base(dir), l.prefix)
	if _, err := strconv.Atoi(n); !found || err != nil || filepath.Base(cwd) != "data" {
		return "", false, false
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		deleted = true
	}
	if !deleted && !startsWithMarker(filepath.Join(dir, l.conf)) {
		return "", false, false
	}
	return dir, deleted, true
}

// startsWithMarker reports whether the file at path starts with dbMarker.
func startsWithMarker(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, len(dbMarker))
	n, _ := f.Read(buf)
	return string(buf[:n]) == dbMarker
}
