package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
)

func TestIsHeapSize(t *testing.T) {
	for s, want := range map[string]bool{"256m": true, "1g": true, "1G": true, "65536": true, "512k": true,
		"": false, "0m": false, "1gg": false, "m": false, "1.5g": false, "-1g": false, "1t": false} {
		if got := isHeapSize(s); got != want {
			t.Errorf("isHeapSize(%q) = %v, want %v", s, got, want)
		}
	}
}

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

// --observers: beside the voters, on SSH the last nodes; refused, naming the field,
// when it cannot be.
func TestObserversValidation(t *testing.T) {
	ok := Config{WorkerArgv: []string{"w"}, Nodes: 3, Observers: 2}.Defaults()
	if err := ok.Validate(); err != nil || ok.service("").Settings.(zookeeper.EnsembleConfig).Observers != 2 {
		t.Errorf("3 voters and 2 observers: %v, ensemble %+v", err, ok.service("").Settings)
	}
	ssh := Config{WorkerArgv: []string{"w"}, Observers: 1, SSH: &lockservice.SSHConfig{Nodes: []string{"a", "b", "c", "d"}}}.Defaults()
	if err := ssh.Validate(); err != nil || ssh.Nodes != 3 {
		t.Errorf("4 SSH nodes, 1 observer: %v, %d voters, want 3", err, ssh.Nodes)
	}
	for want, c := range map[string]Config{
		"observers: want 0 or more":       {Observers: -1},
		"observers: want at most 9":       {Nodes: 5, Observers: 5},
		"observers: ZooKeeper observers":  {Recipe: "redis-lock", Observers: 1},
		"observers: an existing ensemble": {Connect: "192.0.2.1:2181", Observers: 1},
		"leaves no voting server":         {Observers: 2, SSH: &lockservice.SSHConfig{Nodes: []string{"a", "b"}}},
	} {
		c.WorkerArgv = []string{"w"}
		if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error saying %q", c, err, want)
		}
	}
}
