package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

func TestBaselineWarmupValidation(t *testing.T) {
	c := Config{WorkerArgv: []string{"w"}, Baseline: true}.Defaults()
	for warmup, ok := range map[time.Duration]bool{0: true, 10 * time.Second: true, -time.Second: false} {
		c.BaselineWarmup = warmup
		err := c.Validate()
		if ok && err != nil || !ok && (err == nil || !strings.Contains(err.Error(), "baseline-warmup")) {
			t.Errorf("BaselineWarmup %s: %v, want ok %v", warmup, err, ok)
		}
	}
	if (Config{}).Defaults().BaselineWarmup != 0 || DefaultConfig().BaselineWarmup <= 0 {
		t.Errorf("the warm-up is a default of the CLI's (DefaultConfig), and 0 (none) in a Config built by hand")
	}
}

// A client hold is refused below zero, named; a setup's own replaces the base's, a
// setup without one keeps it, and the schedule takes it.
func TestClientHold(t *testing.T) {
	c := Config{WorkerArgv: []string{"w"}, ClientHold: -time.Second}.Defaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "client-hold: want >= 0") {
		t.Errorf("ClientHold -1s: %v", err)
	}
	c.ClientHold = 3 * time.Second
	if got := c.WithSetup(nemesis.Setup{Classes: []nemesis.Class{nemesis.ClassClientPause}}).schedule().ClientHold; got != 3*time.Second {
		t.Errorf("a setup without a client hold: %s, want the base's 3s", got)
	}
	if got := c.WithSetup(nemesis.Setup{ClientHold: time.Second}).schedule().ClientHold; got != time.Second {
		t.Errorf("a setup with a client hold of 1s: %s", got)
	}
}

// --observers: beside the voters, on SSH the last nodes; refused, naming the field,
// when it cannot be.
func TestObserversValidation(t *testing.T) {
	ok := Config{WorkerArgv: []string{"w"}, Nodes: 3, Settings: zookeeper.Settings{Observers: 2}}.Defaults()
	if err := ok.Validate(); err != nil || ok.service("").Settings.(zookeeper.EnsembleConfig).Observers != 2 {
		t.Errorf("3 voters and 2 observers: %v, ensemble %+v", err, ok.service("").Settings)
	}
	ssh := Config{WorkerArgv: []string{"w"}, Settings: zookeeper.Settings{Observers: 1}, SSH: &lockservice.SSHConfig{Nodes: []string{"a", "b", "c", "d"}}}.Defaults()
	if err := ssh.Validate(); err != nil || ssh.Nodes != 3 {
		t.Errorf("4 SSH nodes, 1 observer: %v, %d voters, want 3", err, ssh.Nodes)
	}
	for want, c := range map[string]Config{
		"observers: want 0 or more":       {Settings: zookeeper.Settings{Observers: -1}},
		"observers: want at most 9":       {Nodes: 5, Settings: zookeeper.Settings{Observers: 5}},
		"ZooKeeper settings for":          {Recipe: "redis-lock", Settings: zookeeper.Settings{Observers: 1}},
		"observers: an existing ensemble": {Connect: "192.0.2.1:2181", Settings: zookeeper.Settings{Observers: 1}},
		"leaves no voting server":         {Settings: zookeeper.Settings{Observers: 2}, SSH: &lockservice.SSHConfig{Nodes: []string{"a", "b"}}},
	} {
		c.WorkerArgv = []string{"w"}
		if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error saying %q", c, err, want)
		}
	}
}

// TestVaryFollowsTheRunsOwnFaults: a workload asking to vary gets the standard
// regimes for its own run's faults (a matrix's cell, a suite's run), with the knobs
// set by hand fixed: holds that outlive a session only with client faults.
func TestVaryFollowsTheRunsOwnFaults(t *testing.T) {
	base := Config{WorkerArgv: []string{"w"}}
	base.Workload.Vary, base.Workload.Fixed.AcquireTimeout = true, 700*time.Millisecond
	quiet := base.Defaults()
	faulty := base.WithSetup(nemesis.Setup{Classes: []nemesis.Class{nemesis.ClassClientPause}}).Defaults()
	if len(quiet.Workload.Regimes) == 0 || quiet.Workload.RegimeLength != workloads.DefaultRegimeLength {
		t.Fatalf("no regimes: %+v", quiet.Workload)
	}
	if quiet.Workload.LongestHold() >= quiet.SessionTimeout || faulty.Workload.LongestHold() < faulty.SessionTimeout {
		t.Errorf("longest holds %s without faults and %s with client-pause, session timeout %s: want only the latter past it",
			quiet.Workload.LongestHold(), faulty.Workload.LongestHold(), quiet.SessionTimeout)
	}
	for _, r := range quiet.Workload.Regimes {
		if len(r.Timeouts) != 1 || r.Timeouts[0].Min != 700*time.Millisecond || r.Timeouts[0].Max != 700*time.Millisecond {
			t.Errorf("regime %q: timeouts %+v, want the fixed 700ms", r.Name, r.Timeouts)
		}
	}
	stored := faulty
	stored.Nemesis = nil
	if got := stored.Defaults().Workload.Regimes; len(got) != len(faulty.Workload.Regimes) {
		t.Errorf("a stored run's regimes were drawn again")
	}
}

// TestFinalBound: three session timeouts after faults, two without; the longest hold
// once (the workload's end cuts every other wait and hold), and a turn per worker.
func TestFinalBound(t *testing.T) {
	long := workloads.Config{Regimes: []workloads.Regime{{Name: "long", Holds: []workloads.Span{{Weight: 1, Min: 4 * time.Second, Max: 8 * time.Second}}}}}
	for _, c := range []struct {
		nemesis []nemesis.Class
		want    time.Duration
	}{
		{nil, 4*time.Second + 8*time.Second + 5*finalTurnTime},
		{[]nemesis.Class{nemesis.ClassClientKill}, 6*time.Second + 8*time.Second + 5*finalTurnTime},
	} {
		cfg := Config{Service: kind.Postgres, SessionTimeout: 2 * time.Second, Workers: 5, Nemesis: c.nemesis, Workload: long}
		if got := cfg.FinalBound(); got != c.want {
			t.Errorf("faults %v: final bound %s, want %s", c.nemesis, got, c.want)
		}
	}
}
