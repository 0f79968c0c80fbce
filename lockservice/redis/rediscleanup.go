package redis

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// A run's Redis instances live in its namespaces, so removing a dead run's namespaces
// (netns.CleanupAll) kills them. What that misses is an instance whose namespace is
// gone while it still runs (a namespace deleted under it keeps living, unnamed, as long
// as its processes do): CleanupRedis finds those by the configuration the tool wrote.

// LeftRedis is a redis-server the tool started that still runs; Conf is the
// redis.conf it runs (the tool's: it starts with redisMarker).
type LeftRedis = lockservice.LeftProcess

// FindLeftRedis lists the redis-server processes that run a configuration the tool
// wrote (named on their command line, or the redis.conf next to their data directory,
// their working directory) and that are in none of the tool's namespaces that still
// exist (a live run's). Any other redis-server is not the tool's and is never listed.
func FindLeftRedis() ([]LeftRedis, error) { return lockservice.FindLeftProcesses(ownRedis) }

// CleanupRedis kills what FindLeftRedis lists and waits (up to 5 s) for each to go.
// Call it after netns.CleanupAll: the namespaces that remain then are live runs'.
func CleanupRedis() ([]LeftRedis, error) {
	left, err := FindLeftRedis()
	if err != nil {
		return nil, err
	}
	return left, lockservice.KillLeftProcesses(left, "redis-server", isRedisServer)
}

// ownRedis is the tool's redis.conf that process pid runs when it is a redis-server
// ("" otherwise).
func ownRedis(pid int) string {
	if !isRedisServer(pid) {
		return ""
	}
	return ownConf(pid)
}

// isRedisServer reports whether pid is a redis-server or a redis-sentinel (its
// command name; Debian's binary is redis-check-rdb run by either name).
func isRedisServer(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	c := strings.TrimSpace(string(comm))
	return err == nil && (c == "redis-server" || c == "redis-sentinel")
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
