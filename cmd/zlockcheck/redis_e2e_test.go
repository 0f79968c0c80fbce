package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// TestRedisLivenessNamesTheKeyOfADeadHolder: a lock key without expiry, its holder
// killed, blocks every later acquire; the final phase's verdict names the key and the
// dead session that owns it, read through the lock's key.
func TestRedisLivenessNamesTheKeyOfADeadHolder(t *testing.T) {
	requireRedis(t)
	t.Parallel() // beside the other side-by-side runs (make test's budget)
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

// TestCleanupKillsALeftRedis: a redis-server running a configuration the tool wrote,
// outside any namespace of a live run, is killed and reported by cleanup; a
// redis-server the tool did not start is left alone, and so is a live conformance's
// private one (its configuration is the tool's, outside any namespace by design).
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
	private, err := lockservice.StartLocal(context.Background(), kind.Redis, lockservice.LocalConfig{SessionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer private.Close()
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
	if out, err := exec.Command("redis-cli", "-u", "redis://"+private.Connect(), "PING").Output(); err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Errorf("cleanup killed a live conformance's private redis-server: %q, %v\n%s", out, err, stdout)
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
