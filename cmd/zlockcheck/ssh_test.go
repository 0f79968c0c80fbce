package main

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

func TestSSHFlagsMakeTheConfig(t *testing.T) {
	fs, o := runFlags()
	err := fs.Parse([]string{"--ssh-nodes", "n1, n2,n3", "--ssh-user", "zk", "--ssh-key", "/k", "--ssh-port", "2222",
		"--ssh-insecure-ignore-host-keys", "--zk-setup", "apt", "--keep-node-dirs", "--recipe", "zlc-mutex"})
	if err != nil {
		t.Fatal(err)
	}
	o.noteSet(fs)
	o.quiet = true
	cfg, err := o.plan(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := &lockservice.SSHConfig{Nodes: []string{"n1", "n2", "n3"}, ZKSetup: "apt", NodeDir: lockservice.DefaultNodeDir, KeepNodeDirs: true}
	want.User, want.KeyFile, want.Port, want.InsecureIgnoreHostKeys = "zk", "/k", 2222, true
	if !reflect.DeepEqual(cfg.SSH, want) {
		t.Fatalf("SSH config %+v, want %+v", cfg.SSH, want)
	}
	if cfg.Nodes != 3 {
		t.Fatalf("nodes %d, want one server per SSH node", cfg.Nodes)
	}
}

func TestSSHFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--zk-setup", "apt"}, "--zk-setup goes with --ssh-nodes"},
		{[]string{"--ssh-nodes", "a,b,a"}, "a given twice"},
		{[]string{"--ssh-nodes", "a,b,c", "--nodes", "5"}, "--nodes 5 but --ssh-nodes names 3 nodes"},
		{[]string{"--ssh-nodes", "a", "--zk-setup", "yum"}, `zk-setup: want "apt"`},
		{[]string{"--ssh-nodes", "a", "--ssh-known-hosts", "/kh", "--ssh-insecure-ignore-host-keys"}, "give one, not both"},
		{[]string{"--ssh-nodes", "a", "--node-dir", "relative"}, "node-dir: want an absolute directory"},
	} {
		fs, o := runFlags()
		err := fs.Parse(append(c.args, "--recipe", "zlc-mutex", "--quiet"))
		if err == nil {
			o.noteSet(fs)
			_, err = o.plan(context.Background(), io.Discard)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

func TestSSHRunFileErrorsNameTheLine(t *testing.T) {
	path := writeFile(t, "staging.yaml", "recipe: gozk\nssh-nodes: zk1,zk 2\n")
	fs, _ := runFlags()
	if _, err := loadRunFile(path, fs); err == nil || !strings.Contains(err.Error(), path+`:2: field "ssh-nodes"`) {
		t.Fatalf("error %v, want file, line 2 and field ssh-nodes", err)
	}
	fs, _ = runFlags()
	if _, err := loadRunFile("../../examples/staging-ssh.yaml", fs); err != nil {
		t.Fatalf("the example run file: %v", err)
	}
}

func TestSSHReplayOverride(t *testing.T) {
	stored := &lockservice.SSHConfig{Nodes: []string{"a", "b", "c"}, NodeDir: "/srv/zlc"}
	stored.User = "zk"
	var o sshOptions
	if err := o.nodes.Set("x,y,z"); err != nil {
		t.Fatal(err)
	}
	got, err := o.override(stored, 3, map[string]bool{"ssh-nodes": true})
	if err != nil || !reflect.DeepEqual(got.Nodes, []string{"x", "y", "z"}) || got.User != "zk" || got.NodeDir != "/srv/zlc" {
		t.Fatalf("override %+v, %v: want the new nodes, the stored rest", got, err)
	}
	if _, err := o.override(stored, 5, map[string]bool{"ssh-nodes": true}); err == nil {
		t.Fatal("replaying a 5-server run on 3 nodes was accepted")
	}
	var none sshOptions
	if got, err := none.override(stored, 3, nil); err != nil || !reflect.DeepEqual(got, stored) {
		t.Fatalf("replay without ssh flags: %+v, %v: want the stored nodes", got, err)
	}
}
