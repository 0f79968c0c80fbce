package lockservice

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// Running reports whether process pid exists and is no zombie (one that died but
// that its parent has not yet waited for).
func Running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// NSID identifies a network namespace (its nsfs inode).
type NSID struct{ dev, ino uint64 }

// NetnsOf is the network namespace of process pid (zero when unknown).
func NetnsOf(pid int) NSID {
	return statNS(fmt.Sprintf("/proc/%d/ns/net", pid))
}

func statNS(path string) NSID {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return NSID{}
	}
	return NSID{dev: uint64(st.Dev), ino: st.Ino}
}

// NSIndex names the tool's namespaces by identity. A namespace is made before any
// process runs in it, so one a process is in that the index does not know is looked
// for again on a fresh listing (a run that started meanwhile) before it is taken
// for gone.
type NSIndex struct{ names map[NSID]string }

// NewNSIndex indexes the tool's namespaces that exist now.
func NewNSIndex() (*NSIndex, error) {
	x := &NSIndex{}
	return x, x.refresh()
}

func (x *NSIndex) refresh() error {
	names, err := netns.List()
	if err != nil {
		return err
	}
	x.names = map[NSID]string{}
	for _, n := range names {
		if id := statNS(filepath.Join("/run/netns", n)); id != (NSID{}) {
			x.names[id] = n
		}
	}
	return nil
}

// Lookup names namespace id, ok false when it is none of the tool's that exist.
func (x *NSIndex) Lookup(id NSID) (name string, ok bool, err error) {
	if name, ok = x.names[id]; ok {
		return name, true, nil
	}
	if err := x.refresh(); err != nil {
		return "", false, err
	}
	name, ok = x.names[id]
	return name, ok, nil
}

// LeftProcess is a server process the tool started that outlived its run's
// namespace: a namespace deleted under a process keeps living, unnamed, as long as
// its processes do.
type LeftProcess struct {
	Pid int
	// Conf is the configuration the tool wrote that it runs.
	Conf string
}

// FindLeftProcesses lists the processes that run a configuration the tool wrote
// (own: its path, "" for any other process) and that are in none of the tool's
// namespaces that still exist (a live run's). Conformance's private servers, which run
// outside any namespace, are left out.
func FindLeftProcesses(own func(pid int) string) ([]LeftProcess, error) {
	live, err := NewNSIndex()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []LeftProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Namespace before configuration: a process that exits between the two
		// reads then shows no namespace (skipped) rather than a dead one.
		id := NetnsOf(pid)
		conf := own(pid)
		if conf == "" || id == (NSID{}) || InLiveLocal(conf) {
			continue
		}
		if _, ok, err := live.Lookup(id); err != nil || ok {
			continue
		}
		out = append(out, LeftProcess{Pid: pid, Conf: conf})
	}
	return out, nil
}

// KillLeftProcesses SIGKILLs what FindLeftProcesses listed and waits (up to 5 s) for
// each to go; what names the server in errors ("redis-server"), same says whether a
// pid is still such a server (its command's name: a dying process's command line and
// working directory are gone before it is; a pid reused by another is not waited
// for).
func KillLeftProcesses(left []LeftProcess, what string, same func(pid int) bool) error {
	for _, l := range left {
		_ = syscall.Kill(l.Pid, syscall.SIGKILL)
	}
	var errs []error
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range left {
		for Running(l.Pid) && same(l.Pid) {
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("%s %d (%s) outlived SIGKILL for 5s", what, l.Pid, l.Conf))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// CommandIs reports whether process pid's command name (/proc/PID/comm) starts with
// prefix.
func CommandIs(pid int, prefix string) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(comm)), prefix)
}

// LeftServers is how a kind's sweep reports the server processes it killed
// (KillLeftProcesses): what names the server ("redis-server").
func LeftServers(k kind.Name, what string, left []LeftProcess) []Leftover {
	out := make([]Leftover, len(left))
	for i, l := range left {
		out[i] = Leftover{Kind: k, Short: fmt.Sprintf("%s %d", what, l.Pid),
			Line: fmt.Sprintf("killed %s %d (%s): its run's namespace was gone", what, l.Pid, l.Conf)}
	}
	return out
}
