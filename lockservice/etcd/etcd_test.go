package etcd

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

func TestReleases(t *testing.T) {
	got := Releases()
	if !slices.Equal(got, []string{"3.5.35", "3.6.16", "3.7.3"}) {
		t.Errorf("Releases() = %v", got)
	}
	for _, v := range got {
		m, err := module(v)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(m.Files["go.mod"]), "go.etcd.io/etcd/server/v3 v"+v) {
			t.Errorf("release %s: its go.mod does not pin the server at v%s:\n%s", v, v, m.Files["go.mod"])
		}
		if len(m.Files["go.sum"]) == 0 || !strings.Contains(string(m.Files["main.go"]), "etcdmain.Main") {
			t.Errorf("release %s: no go.sum or no main", v)
		}
	}
	if _, err := module("3.4.0"); err == nil || !strings.Contains(err.Error(), "debian or one of 3.5.35, 3.6.16, 3.7.3") {
		t.Errorf("module(3.4.0): %v, want the list", err)
	}
	if compareVersions("3.10.0", "3.9.1") <= 0 {
		t.Error("3.10.0 sorts before 3.9.1")
	}
}

func TestMemberConf(t *testing.T) {
	urls := []memberURLs{runURLs(1), runURLs(2), runURLs(3)}
	conf := string(memberConf(2, urls, "/d/data", "zlc-r1", "for run r1"))
	if !strings.HasPrefix(conf, confMarker+" 2 of 3") {
		t.Errorf("conf does not start with the marker:\n%s", conf)
	}
	for _, want := range []string{
		`name: "s2"`,
		`listen-client-urls: "http://10.77.1.2:2379"`,
		`initial-advertise-peer-urls: "http://10.77.1.2:2380"`,
		`initial-cluster: "s1=http://10.77.1.1:2380,s2=http://10.77.1.2:2380,s3=http://10.77.1.3:2380"`,
		`initial-cluster-token: "zlc-r1"`,
		`data-dir: "/d/data"`,
	} {
		if !strings.Contains(conf, want+"\n") {
			t.Errorf("conf lacks %s:\n%s", want, conf)
		}
	}
}

func TestSettings(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	get := flags(fs)
	if err := fs.Parse([]string{"--etcd-version", "3.1.0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := get(); err == nil || !strings.Contains(err.Error(), "--etcd-version: want debian or one of") {
		t.Errorf("--etcd-version 3.1.0: %v", err)
	}
	s, p := Settings{}.Defaults(lockservice.Plan{Kind: kind.Etcd})
	if p.Nodes != 3 {
		t.Errorf("default members: %d", p.Nodes)
	}
	for _, c := range []struct {
		p    lockservice.Plan
		want string
	}{
		{lockservice.Plan{Nodes: 2}, "1, 3 or 5 members, not 2"},
		{lockservice.Plan{Nodes: 3, Connect: "10.0.0.1:2379"}, "--connect names 1 etcd members, --nodes says 3"},
		{lockservice.Plan{Nodes: 2, SSH: &lockservice.SSHConfig{Nodes: []string{"n1", "n2"}}}, "ssh-nodes: 2 nodes: an etcd cluster here has 1, 3 or 5 members"},
		{lockservice.Plan{Nodes: 3, Processes: true}, "baseline-processes"},
	} {
		if err := s.Validate(c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", c.p, err, c.want)
		}
	}
	if err := s.Validate(lockservice.Plan{Nodes: 5}); err != nil {
		t.Error(err)
	}
	if err := s.Validate(lockservice.Plan{Nodes: 3, SSH: &lockservice.SSHConfig{Nodes: []string{"n1", "n2", "n3"}}}); err != nil {
		t.Errorf("three SSH nodes: %v", err)
	}
	if err := (Settings{Version: "3.6.16"}).Validate(lockservice.Plan{Nodes: 1, Connect: "10.0.0.1"}); err == nil || !strings.Contains(err.Error(), "etcd-version: an existing cluster") {
		t.Errorf("a release asked of an existing cluster: %v", err)
	}
	if _, p := (Settings{}).Defaults(lockservice.Plan{Connect: "10.0.0.1,10.0.0.2:2381,10.0.0.3"}); p.Nodes != 3 {
		t.Errorf("--connect's members: %d", p.Nodes)
	}
	if b := (Settings{Version: "3.6.16"}).Brief(lockservice.Plan{Nodes: 3}); b != "service etcd (3 members, release 3.6.16)" {
		t.Errorf("Brief = %q", b)
	}
}

// TestClientMatchesTheMembers: --etcd-client's default picks the pinned client of
// the members' minor release, zlockcheck's own for Debian's 3.4 (no 3.4 client builds
// beside it) and for a release of its own minor; GoWorker finds that client's build
// beside the binary, and refuses one missing or older than the binary.
func TestClientMatchesTheMembers(t *testing.T) {
	const own = "3.6.16" // a test binary's build information has no modules
	if got := clients(own); !slices.Equal(got, []string{"3.5.35", own, "3.7.3"}) {
		t.Fatalf("clients(%s) = %v", own, got)
	}
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{}, own},
		{Settings{Version: "3.5.35"}, "3.5.35"},
		{Settings{Version: own}, own},
		{Settings{Version: "3.5.35", Client: own}, own},
		{Settings{Client: "3.5.35"}, "3.5.35"},
	} {
		if got := c.s.client(own); got != c.want {
			t.Errorf("%+v: client %q, want %q", c.s, got, c.want)
		}
	}
	if err := (Settings{Client: "3.1.0"}).Validate(lockservice.Plan{Nodes: 3}); err == nil || !strings.Contains(err.Error(), "etcd-client: want matching or one of") {
		t.Errorf("an unpinned client: %v", err)
	}
	dir := t.TempDir()
	self := filepath.Join(dir, "zlockcheck")
	variant := filepath.Join(dir, "zlockcheck-etcd-client-v3.5.35")
	s := Settings{Version: "3.5.35"}
	if err := os.WriteFile(self, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := (Settings{}).goWorker(self, own); got != self || err != nil {
		t.Errorf("Debian's members: GoWorker = %q, %v; want zlockcheck itself", got, err)
	}
	if _, err := s.goWorker(self, own); err == nil || !strings.Contains(err.Error(), "run make build") {
		t.Errorf("no build beside it: %v", err)
	}
	if err := os.WriteFile(variant, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(variant, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.goWorker(self, own); err == nil || !strings.Contains(err.Error(), "is older than") {
		t.Errorf("a stale build: %v", err)
	}
	if err := os.Chtimes(variant, time.Now().Add(time.Minute), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.goWorker(self, own); got != variant || err != nil {
		t.Errorf("GoWorker = %q, %v; want %q", got, err, variant)
	}
}
