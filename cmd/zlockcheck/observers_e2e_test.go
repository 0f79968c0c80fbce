package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/harness"
)

// TestObserversServerFaultsValid: zlc-mutex on 3 voting servers and 2 observers under
// kill, pause and partition is valid; the observers are configured as such in every
// zoo.cfg, their srvr mode is recorded in the run's server files, and the herd sample
// asks them too.
func TestObserversServerFaultsValid(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	code, stdout, stderr := zlockcheck(t, "run", "--recipe", "zlc-mutex", "--nodes", "3", "--observers", "2",
		"--nemesis", "kill,pause,partition", "--nemesis-interval", "3s", "--time", "20s", "--seed", "1", "--store", store)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)", code, exitValid)
	}
	servers := filepath.Join(store, "latest", "servers")
	modes := map[string]int{}
	for id := 1; id <= 5; id++ {
		dir := filepath.Join(servers, fmt.Sprintf("s%d", id))
		cfg, err := os.ReadFile(filepath.Join(dir, "zoo.cfg"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), "server.4=10.77.1.4:2888:3888:observer") || !strings.Contains(string(cfg), "server.5=10.77.1.5:2888:3888:observer") {
			t.Errorf("s%d's zoo.cfg does not name the observers:\n%s", id, cfg)
		}
		if observer := strings.Contains(string(cfg), "peerType=observer"); observer != (id > 3) {
			t.Errorf("s%d's zoo.cfg: peerType=observer %v, want %v", id, observer, id > 3)
		}
		srvr, err := os.ReadFile(filepath.Join(dir, "srvr.txt"))
		if err != nil {
			t.Fatal(err)
		}
		mode := ""
		for _, l := range strings.Split(string(srvr), "\n") {
			if v, ok := strings.CutPrefix(l, "Mode: "); ok {
				mode = strings.TrimSpace(v)
			}
		}
		if (mode == "observer") != (id > 3) {
			t.Errorf("s%d: srvr mode %q\n%s", id, mode, srvr)
		}
		modes[mode]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Errorf("srvr modes %v, want a leader, 2 followers and 2 observers", modes)
	}
	f, err := os.Open(filepath.Join(store, "latest", "herd.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	most := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var sample struct {
			Servers []struct {
				ID int `json:"id"`
			} `json:"servers"`
		}
		if json.Unmarshal(sc.Bytes(), &sample) == nil {
			most = max(most, len(sample.Servers))
		}
	}
	if most != 5 {
		t.Errorf("the herd samples asked at most %d servers, want 5 (the observers too)", most)
	}
	assertNothingLeft(t, store)
}

// TestObserversBadInput: --observers is refused, naming the flag, before anything is
// made: negative, on a service without observers, with an existing ensemble, or past
// nine servers in all.
func TestObserversBadInput(t *testing.T) {
	store := t.TempDir()
	refusedBeforeAnything(t, store, map[string][]string{
		"observers: want 0 or more":           {"run", "--observers", "-1", "--store", store},
		"--observers: ZooKeeper settings for": {"run", "--recipe", "redis-lock", "--observers", "2", "--store", store},
		"observers: an existing ensemble":     {"run", "--connect", "192.0.2.1:2181", "--observers", "1", "--store", store},
		"observers: want at most 9 servers":   {"run", "--nodes", "5", "--observers", "5", "--store", store},
	})
}

// TestObserversRunFile: the run file's key is the flag's name; a bad value is refused
// naming it.
func TestObserversRunFile(t *testing.T) {
	plan := func(yaml string) (harness.Config, error) {
		fs, o := runFlags()
		if _, err := applyRunFile(fs, writeFile(t, "observers.yaml", yaml)); err != nil {
			return harness.Config{}, err
		}
		o.noteSet(fs)
		return o.plan(context.Background(), io.Discard)
	}
	cfg, err := plan("recipe: zlc-mutex\nobservers: 2\n")
	if err != nil || cfg.Nodes != 3 || cfg.Servers() != 5 {
		t.Errorf("observers: 2: %v, %d nodes and %d servers in all", err, cfg.Nodes, cfg.Servers())
	}
	for yaml, want := range map[string]string{
		"observers: -1\n":                     "observers: want 0 or more",
		"observers: two\n":                    `field "observers"`,
		"recipe: redis-lock\nobservers: 1\n":  "--observers: ZooKeeper settings for the Redis service",
		"recipe: zlc-mutex\nobservers: 7\n":   "observers: want at most 9 servers",
		"recipe: pg-advisory\nobservers: 1\n": "--observers: ZooKeeper settings for the PostgreSQL service",
	} {
		if _, err := plan(yaml); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", yaml, err, want)
		}
	}
}
