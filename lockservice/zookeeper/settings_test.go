package zookeeper

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

func TestIsHeapSize(t *testing.T) {
	for s, want := range map[string]bool{"256m": true, "1g": true, "1G": true, "65536": true, "512k": true,
		"": false, "0m": false, "1gg": false, "m": false, "1.5g": false, "-1g": false, "1t": false} {
		if got := isHeapSize(s); got != want {
			t.Errorf("isHeapSize(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestZKVersion: --zk-version takes the releases releases/pom.xml pins, on the
// ensembles zlockcheck starts, and refuses the rest with the flag's name.
func TestZKVersion(t *testing.T) {
	rel := Releases()
	if len(rel) < 2 {
		t.Fatalf("Releases() = %v, want the 3.8 and 3.9 lines at least", rel)
	}
	for _, v := range rel {
		if !regexp.MustCompile(`^3\.\d+\.\d+$`).MatchString(v) {
			t.Errorf("release %q is not a ZooKeeper version", v)
		}
	}
	plan := lockservice.Plan{Nodes: 3, SessionTimeout: 4 * time.Second}
	d := DefaultSettings()
	for _, tc := range []struct {
		s       Settings
		p       lockservice.Plan
		wantErr string
	}{
		{d, plan, ""},
		{Settings{ZKVersion: rel[0], Tick: d.Tick}, plan, ""},
		{Settings{ZKVersion: "3.4.6", Tick: d.Tick}, plan, `zk-version: want one of ` + strings.Join(rel, ", ") + ` (releases/pom.xml pins them), got "3.4.6"`},
		{Settings{ZKVersion: rel[0], ZKHome: "/opt/zk", Tick: d.Tick}, plan, "give --zk-home or --zk-version, not both"},
		{Settings{ZKVersion: rel[0], Tick: d.Tick}, lockservice.Plan{Nodes: 3, SessionTimeout: 4 * time.Second, Connect: "10.0.0.1:2181"}, "existing ensemble"},
		{Settings{ZKVersion: rel[0], Tick: d.Tick}, lockservice.Plan{Nodes: 3, SessionTimeout: 4 * time.Second, SSH: &lockservice.SSHConfig{Nodes: []string{"a", "b", "c"}}}, "on SSH nodes"},
	} {
		err := tc.s.Validate(tc.p)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%+v: %v", tc.s, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%+v: error %v, want %q", tc.s, err, tc.wantErr)
		}
	}
	if got := (Settings{ZKVersion: rel[1]}).Server(lockservice.Plan{CacheDir: "/c"}, "/d").(EnsembleConfig); got.Release != rel[1] || got.CacheDir != "/c" {
		t.Errorf("Server() = release %q cache %q", got.Release, got.CacheDir)
	}
}
