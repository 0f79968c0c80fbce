package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// requireRedis skips tests that need root, namespaces and Debian's redis-server
// (fails under ZLC_REQUIRE_INTEGRATION, as requireIntegration does).
func requireRedis(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.RedisServer)
}

// TestRunRedisTopologiesAreValid: one run per topology, each valid, its liveness
// judged through the lock's key: the single-instance lock on one instance, RedLock on
// three, bsm/redislock on a primary with two replicas (AOF always); config.json
// records the service; nothing of the run is left.
func TestRunRedisTopologiesAreValid(t *testing.T) {
	requireRedis(t)
	cases := []struct {
		name  string
		args  []string
		files []string
	}{
		{"redis-lock", []string{"--service", "redis", "--recipe", "redis-lock"}, []string{"servers/s1/redis.conf"}},
		{"redsync", []string{"--service", "redis", "--redis-topology", "redlock", "--nodes", "3", "--recipe", "redsync"},
			[]string{"servers/s1/redis.conf", "servers/s3/redis.conf"}},
		{"replicas", []string{"--service", "redis", "--redis-topology", "replicas", "--redis-persistence", "aof-always", "--recipe", "redislock"},
			[]string{"servers/s2/redis.conf", "servers/s1/data/appendonlydir"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := t.TempDir()
			args := append([]string{"run", "--time", "10s", "--seed", "7", "--store", store}, c.args...)
			code, stdout, stderr := zlockcheck(t, args...)
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if code != exitValid {
				t.Fatalf("exit %d, want %d (valid)", code, exitValid)
			}
			res := readResults(t, store)
			acq := res["counts"].(map[string]any)["acquire"].(map[string]any)
			if ok, _ := acq["ok"].(float64); ok < 20 {
				t.Errorf("only %v acquires succeeded in 10 s", acq["ok"])
			}
			if !hasCheck(res, "liveness", "valid") {
				t.Errorf("no valid liveness check (the final phase): %v", res["checks"])
			}
			for _, f := range append(c.files, "servers/s1/server.log", "history.jsonl") {
				if _, err := os.Stat(filepath.Join(store, "latest", f)); err != nil {
					t.Errorf("run directory lacks %s: %v", f, err)
				}
			}
			var cfg struct {
				Service string `json:"service"`
				Redis   struct {
					Topology, Persistence string
				} `json:"redis"`
			}
			data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
			if err != nil || json.Unmarshal(data, &cfg) != nil || cfg.Service != "redis" || cfg.Redis.Topology == "" || cfg.Redis.Persistence == "" {
				t.Errorf("config.json does not record the service and its settings: %+v (%v)", cfg, err)
			}
			if !strings.Contains(stderr, "redis 7.") {
				t.Errorf("the run's log does not say which Redis serves:\n%s", stderr)
			}
			assertNothingLeft(t, store)
		})
	}
}

// TestRedisLivenessNamesTheKeyOfADeadHolder: a lock key without expiry, its holder
// killed, blocks every later acquire; the final phase's verdict names the key and the
// dead session that owns it, read through the lock's key.
func TestRedisLivenessNamesTheKeyOfADeadHolder(t *testing.T) {
	requireRedis(t)
	store := t.TempDir()
	code, stdout, stderr := zlockcheck(t, "run", "--service", "redis", "--recipe", "mutant-redis-no-expiry", "--allow-mutants",
		"--nemesis", "client-kill", "--nemesis-targets", "holder", "--nemesis-interval", "2s", "--time", "8s", "--seed", "5", "--store", store)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d (invalid)", code, exitInvalid)
	}
	res := readResults(t, store)
	if !hasCheck(res, "liveness", "invalid") {
		t.Fatalf("no invalid liveness check: %v", res["checks"])
	}
	data, err := os.ReadFile(filepath.Join(store, "latest", "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		var op struct {
			F     string `json:"f"`
			Value struct {
				Children []struct {
					Node         string `json:"node"`
					Owner        string `json:"ephemeral_owner"`
					SessionAlive bool   `json:"session_alive"`
				} `json:"children"`
			} `json:"value"`
		}
		if json.Unmarshal([]byte(line), &op) != nil || op.F != "liveness" {
			continue
		}
		for _, c := range op.Value.Children {
			found = found || strings.HasPrefix(c.Node, "/zlc/") && strings.HasPrefix(c.Owner, "0x") && !c.SessionAlive
		}
	}
	if !found {
		t.Error("the liveness record does not name the lock's key owned by a dead session")
	}
	assertNothingLeft(t, store)
}

// hasCheck reports whether results hold a check of key with verdict.
func hasCheck(res map[string]any, key, verdict string) bool {
	checks, _ := res["checks"].([]any)
	for _, c := range checks {
		m, _ := c.(map[string]any)
		if m["key"] == key && m["verdict"] == verdict {
			return true
		}
	}
	return false
}

// TestCleanupKillsALeftRedis: a redis-server running a configuration the tool wrote,
// outside any namespace of a live run, is killed and reported by cleanup; a
// redis-server the tool did not start is left alone.
func TestCleanupKillsALeftRedis(t *testing.T) {
	requireRedis(t)
	ours, theirs := t.TempDir(), t.TempDir()
	conf := filepath.Join(ours, "redis.conf")
	text := "# written by zlockcheck: a leftover for the cleanup test\nport 0\nunixsocket " + ours + "/redis.sock\nsave \"\"\nappendonly no\ndir " + ours + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	left := exec.Command("redis-server", conf)
	foreign := exec.Command("redis-server", "--port", "0", "--unixsocket", filepath.Join(theirs, "redis.sock"), "--save", "", "--appendonly", "no", "--dir", theirs)
	for _, c := range []*exec.Cmd{left, foreign} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = c.Wait() }()
		defer func() { _ = c.Process.Kill() }()
	}
	for _, dir := range []string{ours, theirs} {
		waitRedisSocket(t, filepath.Join(dir, "redis.sock"))
	}
	code, stdout, stderr := zlockcheck(t, "cleanup")
	if code != 0 {
		t.Fatalf("cleanup: exit %d\n%s%s", code, stdout, stderr)
	}
	want := fmt.Sprintf("killed redis-server %d (%s)", left.Process.Pid, conf)
	if !strings.Contains(stdout, want) {
		t.Errorf("cleanup did not report %q:\n%s", want, stdout)
	}
	if out, err := exec.Command("redis-cli", "-s", filepath.Join(theirs, "redis.sock"), "PING").Output(); err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Errorf("the redis-server the tool did not start no longer answers: %q, %v", out, err)
	}
	if strings.Contains(stdout, strconv.Itoa(foreign.Process.Pid)) {
		t.Errorf("cleanup reported the foreign redis-server:\n%s", stdout)
	}
}

// waitRedisSocket waits (up to 5 s) until a redis-server answers PING on sock.
func waitRedisSocket(t *testing.T, sock string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out, err := exec.Command("redis-cli", "-s", sock, "PING").Output(); err == nil && strings.TrimSpace(string(out)) == "PONG" {
			return
		}
	}
	t.Fatalf("no redis-server answers on %s", sock)
}
