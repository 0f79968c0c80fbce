package etcd

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// A run's members live in its namespaces, so removing a dead run's namespaces kills
// them; what that misses is a member whose namespace is gone while it still runs.
// Cleanup finds those by the configuration the tool wrote (confMarker).

// Left is an etcd member the tool started that outlived its run's namespace; Conf
// is its configuration (--config-file).
type Left = lockservice.LeftProcess

// FindLeft lists the processes that run a configuration the tool wrote and are in
// none of the tool's namespaces that still exist (a live run's). No other etcd is
// ever listed.
func FindLeft() ([]Left, error) { return lockservice.FindLeftProcesses(ownConf) }

// Cleanup kills what FindLeft lists and waits (up to 5 s) for each to go. Call it
// after the dead runs' namespaces are removed.
func Cleanup() ([]Left, error) {
	left, err := FindLeft()
	if err != nil {
		return nil, err
	}
	return left, lockservice.KillLeftProcesses(left, "etcd", func(pid int) bool { return lockservice.CommandIs(pid, "etcd") })
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
