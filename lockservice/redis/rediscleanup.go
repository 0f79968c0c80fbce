package redis

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// A run's Redis instances live in its namespaces, so removing a dead run's namespaces
// (netns.CleanupAll) kills them. What that misses is an instance whose namespace is
// gone while it still runs (a namespace deleted under it keeps living, unnamed, as long
// as its processes do): CleanupRedis finds those by the configuration the tool wrote.

// LeftRedis is a redis-server the tool started that still runs.
type LeftRedis struct {
	Pid int
	// Conf is the redis.conf it runs (the tool's: it starts with redisMarker).
	Conf string
}

// FindLeftRedis lists the redis-server processes that run a configuration the tool
// wrote (named on their command line, or the redis.conf next to their data directory,
// their working directory) and that are in none of the tool's namespaces that still
// exist (a live run's). Any other redis-server is not the tool's and is never listed.
func FindLeftRedis() ([]LeftRedis, error) {
	live, err := lockservice.NewNSIndex()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []LeftRedis
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isRedisServer(pid) {
			continue
		}
		// Namespace before configuration: a process that exits between the two
		// reads then shows no namespace (skipped) rather than a dead one.
		id := lockservice.NetnsOf(pid)
		conf := ownConf(pid)
		if conf == "" || id == (lockservice.NSID{}) || lockservice.InLiveLocal(conf) {
			continue // conformance's private servers run outside any namespace
		}
		if _, ok, err := live.Lookup(id); err != nil || ok {
			continue
		}
		out = append(out, LeftRedis{Pid: pid, Conf: conf})
	}
	return out, nil
}

// CleanupRedis kills what FindLeftRedis lists and waits (up to 5 s) for each to go.
// Call it after netns.CleanupAll: the namespaces that remain then are live runs'.
func CleanupRedis() ([]LeftRedis, error) {
	left, err := FindLeftRedis()
	if err != nil {
		return nil, err
	}
	for _, l := range left {
		_ = syscall.Kill(l.Pid, syscall.SIGKILL)
	}
	var errs []error
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range left {
		for lockservice.Running(l.Pid) && isRedisServer(l.Pid) {
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("redis-server %d (%s) outlived SIGKILL for 5s", l.Pid, l.Conf))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return left, errors.Join(errs...)
}

// isRedisServer reports whether pid is a redis-server (its command name; Debian's
// binary is redis-check-rdb run by that name).
func isRedisServer(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(comm)) == "redis-server"
}

// ownConf is the tool's redis.conf that process pid runs, "" when it runs none: a
// path on its command line (the title the tool's configuration gives it ends with
// it), or redis.conf in its working directory or that directory's parent.
func ownConf(pid int) string {
	var candidates []string
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		for _, f := range strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " ")) {
			if filepath.IsAbs(f) && strings.HasSuffix(f, ".conf") {
				candidates = append(candidates, f)
			}
		}
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil {
		candidates = append(candidates, filepath.Join(cwd, "redis.conf"), filepath.Join(filepath.Dir(cwd), "redis.conf"))
	}
	for _, c := range candidates {
		if writtenByUs(c) {
			return c
		}
	}
	return ""
}

// writtenByUs reports whether the file at path starts with redisMarker.
func writtenByUs(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	return (err == nil || line != "") && strings.HasPrefix(line, redisMarker)
}
