package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Every run (and test fixture) owns what is named Prefix+id+...: its namespaces, its
// links and tables in the host's namespace, its servers' records. Its owner file,
// /run/zlc<id>.owner, is the one catalogue of who owns what, and says whether the
// owner still lives:
//
//   - the owning process holds an exclusive flock on it for its whole life; the
//     kernel releases the lock when the process dies, however it dies (SIGKILL
//     included), and no reused pid can ever hold it again;
//   - it also holds the owner's pid: an owner whose lock is gone while it still runs
//     (the process with that pid started before the file was written: no reused
//     pid) is live too.
//
// The file is written and locked under a temporary name and only then linked to its
// own, so whoever finds an owner file finds it locked while its owner lives (a file
// from a version without the lock is live while its pid runs). Whatever is named
// after no live owner is a dead run's: CleanupAll removes it.

// ownerSuffix ends an owner file's name.
const ownerSuffix = ".owner"

// ownerDir holds the owner files.
const ownerDir = "/run"

func ownerFile(id string) string {
	return filepath.Join(ownerDir, Prefix+id+ownerSuffix)
}

// owner is a held owner file: fd is open with its flock (a raw descriptor, which no
// finalizer closes while the process lives).
type owner struct {
	path string
	fd   int
}

// claimOwner writes, locks and links id's owner file. It fails when a live owner
// already has id; a dead one's file is replaced.
func claimOwner(id string) (*owner, error) {
	final := ownerFile(id)
	tmp := filepath.Join(ownerDir, fmt.Sprintf(".%s%s.%d.tmp", Prefix, id, os.Getpid()))
	fd, err := unix.Open(tmp, unix.O_CREAT|unix.O_TRUNC|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("owner file: %w", err)
	}
	defer os.Remove(tmp)
	fail := func(err error) (*owner, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("owner file %s: %w", final, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(err)
	}
	if _, err := unix.Write(fd, fmt.Appendf(nil, "%d\n", os.Getpid())); err != nil {
		return fail(err)
	}
	for try := 0; ; try++ {
		err := unix.Link(tmp, final)
		if err == nil {
			return &owner{path: final, fd: fd}, nil
		}
		if !errors.Is(err, unix.EEXIST) || try > 0 {
			return fail(err)
		}
		if ownerAlive(final) {
			return fail(fmt.Errorf("run id %q is in use by a live run", id))
		}
		removeDeadOwner(final)
	}
}

// release removes the owner file and ends the lock: what the owner named is gone.
func (o *owner) release() {
	if o == nil || o.fd < 0 {
		return
	}
	if sameFile(o.fd, o.path) {
		os.Remove(o.path)
	}
	unix.Close(o.fd)
	o.fd = -1
}

// sameFile reports whether path is still the file open as fd.
func sameFile(fd int, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Stat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// startedAt is when process pid started (to a second; ok false when it does not run
// or is a zombie, dead and not yet waited for): field 22 of /proc/pid/stat, in clock
// ticks since boot, plus the boot time.
func startedAt(pid int) (t time.Time, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, false
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return time.Time{}, false
	}
	// The fields after the command name start at field 3, the state.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	boot, berr := bootTime()
	if err != nil || berr != nil {
		// Running, start unknown: taken as the owner.
		return time.Time{}, true
	}
	// Linux reports clock ticks at USER_HZ, 100 a second.
	return boot.Add(time.Duration(ticks) * (time.Second / 100)), true
}

// bootTime is when the machine booted (btime in /proc/stat).
func bootTime() (time.Time, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(s, 0), err
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
}

// stampAlive reports whether the process that wrote an owner file (its content,
// data, names its pid; written at mtime) runs: a process with that pid runs and
// started before the file was written (one started after has a reused pid).
func stampAlive(data []byte, mtime time.Time) bool {
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		// Unreadable: dead, unless just written (a version without the lock writes
		// the file in place, empty for a moment).
		return time.Since(mtime) < 10*time.Second
	}
	start, ok := startedAt(pid)
	// Boot time is known to a second: a margin keeps the comparison on the safe side.
	return ok && !start.After(mtime.Add(2*time.Second))
}

// ownerAlive reports whether the owner file at path names a live owner: its lock is
// held, or the process it names runs. A file that cannot be read is taken as live:
// nothing is removed on a guess.
func ownerAlive(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	data, mtime, err := readFD(fd)
	return err != nil || stampAlive(data, mtime)
}

// readFD reads what fd holds from its start, and when it was last written.
func readFD(fd int) ([]byte, time.Time, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, time.Time{}, err
	}
	buf := make([]byte, 64)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return nil, time.Time{}, err
	}
	return buf[:n], time.Unix(st.Mtim.Unix()), nil
}

// removeDeadOwner removes the owner file at path if its owner is dead, holding its
// lock meanwhile so that it never removes a file a live owner holds.
func removeDeadOwner(path string) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil || !sameFile(fd, path) {
		return
	}
	if data, mtime, err := readFD(fd); err == nil && !stampAlive(data, mtime) {
		os.Remove(path)
	}
}

// ownerFiles lists the owner files there are now, by their stem (Prefix+id).
func ownerFiles() map[string]string {
	files, _ := filepath.Glob(filepath.Join(ownerDir, Prefix+"*"+ownerSuffix))
	out := map[string]string{}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), ownerSuffix)] = f
	}
	return out
}

// Owned reports whether name (a namespace, link, table or record named
// Prefix+id+...) belongs to a run or fixture whose owner lives now. Call it after
// finding name: an owner file is made before anything named after it, so a live
// owner's things are never taken for a dead one's.
func Owned(name string) bool {
	for stem, f := range ownerFiles() {
		if strings.HasPrefix(name, stem) && ownerAlive(f) {
			return true
		}
	}
	return false
}

// removeDeadOwners removes the owner files of dead owners, and the temporary ones
// of owners that died while making theirs.
func removeDeadOwners() {
	for _, f := range ownerFiles() {
		removeDeadOwner(f)
	}
	tmps, _ := filepath.Glob(filepath.Join(ownerDir, "."+Prefix+"*.tmp"))
	for _, f := range tmps {
		removeDeadOwner(f)
	}
}
