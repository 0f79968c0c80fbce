package sqldb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// The database servers (Postgres, MariaDB) share their layout: server N of a run runs
// in the run network's namespace sN, its files in one directory of the run directory
// named with the zlc prefix (zlcpg-sN, zlcmariadb-sN) holding the data directory
// (data/), the configuration the tool wrote and the server's log. A record file,
// /run/<namespace>.zlcdb, names that directory while the server lives, so that a
// cleanup after a crash finds it even when the server's processes are gone.

// The directory-name prefixes of the database servers' directories.
const (
	pgDirPrefix      = "zlcpg-s"
	mariadbDirPrefix = "zlcmariadb-s"
)

// dbRecordDir and dbRecordSuffix make a server's record file: /run/<ns>.zlcdb.
const (
	dbRecordDir    = "/run"
	dbRecordSuffix = ".zlcdb"
)

// dbRecord is the path of the record file of the server in namespace ns.
func dbRecord(ns string) string { return filepath.Join(dbRecordDir, ns+dbRecordSuffix) }

// writeDBRecord records that dir belongs to the server in namespace ns.
func writeDBRecord(ns, dir string) error {
	return os.WriteFile(dbRecord(ns), []byte(dir+"\n"), 0o644)
}

// dbHost is a database server's host: a namespace of the run (nsHost) whose every
// process is the server's. Postgres's backends lead their own process groups (each
// calls setsid), so a signal to the postmaster's group misses them: Kill and Signal
// reach every process in the namespace too.
type dbHost struct {
	*lockservice.NSHost
}

var _ nemesis.ServerHost = dbHost{}

// Kill SIGKILLs the server's process group and every other process in its namespace,
// and waits until they are gone.
func (h dbHost) Kill(ctx context.Context) error {
	err := h.NSHost.Kill(ctx)
	return errors.Join(err, netns.KillAll(h.String()))
}

// Signal sends sig to the server's process group and to every other process in its
// namespace (a pause stops the backends as well as the postmaster).
func (h dbHost) Signal(ctx context.Context, sig syscall.Signal) error {
	if err := h.NSHost.Signal(ctx, sig); err != nil {
		return err
	}
	for _, pid := range netns.Pids(h.String()) {
		if pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, sig)
		}
	}
	return nil
}

// stop sends sig to the server (its process group and namespace) and waits up to
// grace for every process in the namespace to go, then kills what is left.
func (h dbHost) stop(sig syscall.Signal, grace time.Duration) error {
	_ = h.Signal(context.Background(), sig)
	_ = h.Signal(context.Background(), syscall.SIGCONT) // a paused server handles sig
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if h.Pid() == 0 && len(netns.Pids(h.String())) == 0 {
			return nil
		}
	}
	return h.Kill(context.Background())
}

// startPhase is how long one step of starting a database server took.
type startPhase struct {
	name string
	took time.Duration
}

func (p startPhase) String() string { return p.name + " " + p.took.Round(time.Millisecond).String() }

// timed runs fn and appends how long it took, as phase name, to phases.
func timed(phases *[]startPhase, name string, fn func() error) error {
	start := time.Now()
	err := fn()
	*phases = append(*phases, startPhase{name, time.Since(start)})
	return err
}

// removeDBDir removes a server's directory and its record; it refuses a directory
// whose name lacks the database prefixes (it removes nothing but the tool's own).
func removeDBDir(ns, dir string) error {
	if dir != "" {
		if !slices.ContainsFunc(dbLayouts, func(l dbLayout) bool { return strings.HasPrefix(filepath.Base(dir), l.prefix) }) {
			return fmt.Errorf("refusing to remove %s: not a database server's directory", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if parent := filepath.Dir(dir); strings.HasPrefix(filepath.Base(parent), pgRunDirPrefix) {
			_ = os.Remove(parent) // made for the run (runDirFor): gone with its last server
		}
	}
	if err := os.Remove(dbRecord(ns)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// osUser is a user account a server runs as.
type osUser struct {
	Name     string
	UID, GID int
	Groups   []int
}

// lookupOSUser reads the account name from the system's user database.
func lookupOSUser(name string) (osUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return osUser{}, err
	}
	out := osUser{Name: name}
	if out.UID, err = strconv.Atoi(u.Uid); err != nil {
		return osUser{}, err
	}
	if out.GID, err = strconv.Atoi(u.Gid); err != nil {
		return osUser{}, err
	}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if id, err := strconv.Atoi(g); err == nil {
			out.Groups = append(out.Groups, id)
		}
	}
	return out, nil
}

// checkReachable reports the first directory on the way to dir (dir included) that
// user u cannot search, as an error naming it and its mode.
func checkReachable(dir string, u osUser) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var chain []string
	for p := abs; ; p = filepath.Dir(p) {
		chain = append([]string{p}, chain...)
		if p == filepath.Dir(p) {
			break
		}
	}
	for _, p := range chain {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err
		}
		if !searchable(st, u) {
			return fmt.Errorf("user %s cannot enter %s (mode %04o, owner %d): put the run directory where it can (e.g. under /tmp or /var/tmp)",
				u.Name, p, st.Mode&0o7777, st.Uid)
		}
	}
	return nil
}

// searchable reports whether user u may search (x) the directory with status st.
func searchable(st syscall.Stat_t, u osUser) bool {
	switch {
	case int(st.Uid) == u.UID:
		return st.Mode&0o100 != 0
	case int(st.Gid) == u.GID || slices.Contains(u.Groups, int(st.Gid)):
		return st.Mode&0o010 != 0
	default:
		return st.Mode&0o001 != 0
	}
}

// asUser is argv run as user u in directory dir: env changes directory (the
// harness's own may be closed to u) and setpriv switches user and groups, each then
// execing the next, so the server is the very process started (its pid is the
// host's), with no session or PAM in between (runuser would stay as its parent).
func asUser(u osUser, dir string, argv ...string) []string {
	return append([]string{"env", "--chdir=" + dir, "setpriv", "--reuid=" + u.Name, "--regid=" + strconv.Itoa(u.GID), "--init-groups", "--"}, argv...)
}
