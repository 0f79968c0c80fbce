package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestConnectToAnExistingRedis: Redis instances the test started outside the tool
// (in a namespace the test made, with a password, on ports other than 6379) are
// tested with --connect: the password comes from REDISCLI_AUTH and reaches no file
// and no message; a wrong one is a clear error; server faults are refused; under
// client faults redis-lock on a primary and its replica, and redsync on three
// independent instances (RedLock), are valid, and each run leaves no key on any
// instance and nothing on the host.
func TestConnectToAnExistingRedis(t *testing.T) {
	requireRedis(t)
	// Not side by side: its test nodes' bridge and the run's uplink are links in the
	// host's namespace, which the other runs' leftover checks would count.
	nodes := testnodes.StartT(t, 1)
	const password = "zlc-s3cret-9f2c"
	addr, stop, err := nodes.StartRedis(context.Background(), t.TempDir(), password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	fwd := forwardingOf(t, nodes.Bridge())
	base := []string{"run", "--service", "redis", "--recipe", "redis-lock", "--connect", addr, "--time", "12s", "--seed", "2"}

	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct {
			env, want string
			args      []string
		}{
			{"wrong-password", "AUTH (the password in " + redisopt.PasswordVar + ")", nil},
			{"", "NOAUTH", nil},
			{password, "acts on the servers", []string{"--nemesis", "kill"}},
		} {
			store := t.TempDir()
			code, stdout, stderr := zlockcheckEnv(t, []string{redisopt.PasswordVar + "=" + c.env}, append(append(base, "--store", store), c.args...)...)
			if code != exitError || !strings.Contains(stderr, c.want) {
				t.Errorf("password %q, %v: exit %d, stderr %q; want exit %d and %q", c.env, c.args, code, stderr, exitError, c.want)
			}
			assertNoSecret(t, password, store, stdout+stderr)
		}
	})
	// More instances: a replica of the first, and two independent ones for RedLock.
	start := func(port int, primary string) string {
		a, stop, err := nodes.StartRedisAt(context.Background(), t.TempDir(), password, port, primary)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stop() })
		return a
	}
	replica := start(6391, addr)
	waitLinked(t, replica, password)
	redlock := []string{start(6392, ""), start(6393, ""), start(6394, "")}
	for _, c := range []struct {
		name      string
		instances []string
		args      []string
	}{
		{"redis-lock/replicas", []string{addr, replica}, []string{"--recipe", "redis-lock", "--redis-topology", "replicas",
			"--nemesis", "client-kill,connection-kill,client-pause"}},
		// Not connection-kill: every worker reaches the instances from one
		// masqueraded address, and a client id alone names no instance when
		// several have a client with it (the fault says so and is not applied).
		{"redsync/redlock", redlock, []string{"--recipe", "redsync", "--redis-topology", "redlock",
			"--nemesis", "client-kill,client-pause"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := keptIfFailed(t)
			args := append([]string{"run", "--service", "redis", "--connect", strings.Join(c.instances, ","), "--time", "8s", "--seed", "2",
				"--store", store, "--nemesis-targets", "holder", "--nemesis-interval", "3s"}, c.args...)
			code, stdout, stderr := zlockcheckEnv(t, []string{redisopt.PasswordVar + "=" + password}, args...)
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if code != exitValid {
				t.Fatalf("exit %d, want %d (valid)", code, exitValid)
			}
			if !strings.Contains(stdout, "(existing, not managed by zlockcheck)") {
				t.Error("the run does not say the Redis was an existing one")
			}
			assertFaultsApplied(t, stderr)
			assertNoSecret(t, password, store, stdout+stderr)
			for _, a := range c.instances {
				rc := goredis.NewClient(&goredis.Options{Addr: a, Password: password})
				if n, err := rc.DBSize(context.Background()).Result(); err != nil || n != 0 {
					keys, _ := rc.Keys(context.Background(), "*").Result()
					t.Errorf("the run left %d keys on the Redis at %s (%v): %v", n, a, keys, err)
				}
				rc.Close()
			}
			assertHostLeftNothing(t, store, nodes.Bridge(), fwd)
		})
	}
}

// zlockcheckEnv is zlockcheck with env added to the environment.
func zlockcheckEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		return exitErr.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// assertNoSecret fails when secret is in output or in any file under store.
func assertNoSecret(t *testing.T, secret, store, output string) {
	t.Helper()
	if strings.Contains(output, secret) {
		t.Error("the password is in the run's output")
	}
	_ = filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(secret)) {
			t.Errorf("the password is in %s", p)
		}
		return nil
	})
}

// waitLinked waits until the replica at addr has its link to its primary up (a
// deployment's replica in sync, as a team's staging one is).
func waitLinked(t *testing.T, addr, password string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password})
	defer c.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not linked to its primary: %v\n%s", addr, err, info)
		}
	}
}
