package etcd

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// A run's members live in its namespaces, so removing a dead run's namespaces kills
// them; what that misses is a member whose namespace is gone while it still runs.
// Cleanup finds those by the configuration the tool wrote (confMarker).

// Left is an etcd member the tool started that outlived its run's namespace.
type Left struct {
	Pid int
	// Conf is the configuration it runs (--config-file).
	Conf string
}

// FindLeft lists the processes that run a configuration the tool wrote and are in
// none of the tool's namespaces that still exist (a live run's). No other etcd is
// ever listed.
func FindLeft() ([]Left, error) {
	live, err := lockservice.NewNSIndex()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Left
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		id := lockservice.NetnsOf(pid) // before the configuration: see redis.FindLeftRedis
		conf := ownConf(pid)
		if conf == "" || id == (lockservice.NSID{}) || lockservice.InLiveLocal(conf) {
			continue // conformance's private servers run outside any namespace
		}
		if _, ok, err := live.Lookup(id); err != nil || ok {
			continue
		}
		out = append(out, Left{Pid: pid, Conf: conf})
	}
	return out, nil
}

// Cleanup kills what FindLeft lists and waits (up to 5 s) for each to go. Call it
// after the dead runs' namespaces are removed.
func Cleanup() ([]Left, error) {
	left, err := FindLeft()
	if err != nil {
		return nil, err
	}
	for _, l := range left {
		_ = syscall.Kill(l.Pid, syscall.SIGKILL)
	}
	var errs []error
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range left {
		for lockservice.Running(l.Pid) && ownConf(l.Pid) != "" {
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("etcd %d (%s) outlived SIGKILL for 5s", l.Pid, l.Conf))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return left, errors.Join(errs...)
}

// ownConf is the tool's configuration that process pid runs (the file after
// --config-file on its command line, if it starts with confMarker), "" otherwise.
func ownConf(pid int) string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	args := strings.Split(string(cmdline), "\x00")
	for i, a := range args {
		if a == "--config-file" && i+1 < len(args) && writtenByUs(args[i+1]) {
			return args[i+1]
		}
	}
	return ""
}

// writtenByUs reports whether the file at path starts with confMarker.
func writtenByUs(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	return (err == nil || line != "") && strings.HasPrefix(line, confMarker)
}
