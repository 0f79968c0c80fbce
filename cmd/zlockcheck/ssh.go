package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// sshOptions are the --ssh-* flags of run (and matrix, explore, replay, cleanup): an
// ensemble on real hosts over SSH (lockservice.SSHConfig).
type sshOptions struct {
	nodes nodeList
	cfg   lockservice.SSHConfig
}

// nodeList is --ssh-nodes: comma-separated hosts, checked as they are set (so a run
// file's bad value is reported with its line).
type nodeList []string

func (l *nodeList) String() string { return strings.Join(*l, ",") }

func (l *nodeList) Set(v string) error {
	var nodes []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			nodes = append(nodes, n)
		}
	}
	if err := (lockservice.SSHConfig{Nodes: nodes}).Validate(); err != nil {
		return err
	}
	*l = nodes
	return nil
}

// register defines the flags on fs; run says whether the run-only ones (how to set
// the nodes up, what to keep) are wanted too.
func (o *sshOptions) register(fs *flag.FlagSet, run bool) {
	fs.Var(&o.nodes, "ssh-nodes", "run the ensemble on these hosts over SSH, one server each, comma-separated (README: Real hosts over SSH); --nodes follows")
	fs.StringVar(&o.cfg.User, "ssh-user", "", "with --ssh-nodes: the SSH user (default root; others run nft and tc with sudo -n)")
	fs.StringVar(&o.cfg.KeyFile, "ssh-key", "", "with --ssh-nodes: the private key file (default ~/.ssh/id_ed25519, then id_rsa)")
	fs.IntVar(&o.cfg.Port, "ssh-port", sshnode.DefaultPort, "with --ssh-nodes: sshd's port")
	fs.StringVar(&o.cfg.KnownHostsFile, "ssh-known-hosts", "", "with --ssh-nodes: known_hosts file checking the nodes' host keys (default ~/.ssh/known_hosts)")
	fs.BoolVar(&o.cfg.InsecureIgnoreHostKeys, "ssh-insecure-ignore-host-keys", false, "with --ssh-nodes: accept any host key (no known_hosts check)")
	fs.StringVar(&o.cfg.NodeDir, "node-dir", lockservice.DefaultNodeDir, "with --ssh-nodes: each node keeps a run's files in DIR/zlc<run>/s<N>")
	if run {
		fs.StringVar(&o.cfg.ZKSetup, "zk-setup", "", "with --ssh-nodes: apt installs Debian's zookeeper and a JRE on each node first (default: use the install there, --zk-home or the package)")
		fs.BoolVar(&o.cfg.KeepNodeDirs, "keep-node-dirs", false, "with --ssh-nodes: leave each node's directory (data, log) after the run")
	}
}

// sshFlags are the flags register defines, to tell whether any was given.
var sshFlags = []string{"ssh-nodes", "ssh-user", "ssh-key", "ssh-port", "ssh-known-hosts", "ssh-insecure-ignore-host-keys", "node-dir", "zk-setup", "keep-node-dirs"}

// config is the SSH configuration the flags give: nil without --ssh-nodes (then any
// other SSH flag in set, the flags given, is an error).
func (o *sshOptions) config(set map[string]bool) (*lockservice.SSHConfig, error) {
	if len(o.nodes) == 0 {
		for _, f := range sshFlags {
			if set[f] && f != "ssh-nodes" {
				return nil, usageError{fmt.Sprintf("--%s goes with --ssh-nodes", f)}
			}
		}
		return nil, nil
	}
	cfg := o.cfg
	cfg.Nodes = append([]string(nil), o.nodes...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// given lists which of fs's flags were set.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// override is a stored run's SSH configuration with the SSH flags given (set) put
// over it: replay runs an SSH run on the nodes it names, or on --ssh-nodes given
// again (as many as the run had servers); --ssh-nodes also moves a local run onto
// SSH nodes.
func (o *sshOptions) override(stored *lockservice.SSHConfig, nodes int, set map[string]bool) (*lockservice.SSHConfig, error) {
	if stored == nil {
		if len(o.nodes) == 0 {
			return o.config(set)
		}
		stored = &lockservice.SSHConfig{}
	}
	cfg := *stored
	if set["ssh-nodes"] {
		if len(o.nodes) != nodes {
			return nil, usageError{fmt.Sprintf("--ssh-nodes names %d nodes, the run had %d servers", len(o.nodes), nodes)}
		}
		cfg.Nodes = append([]string(nil), o.nodes...)
	}
	for name, apply := range map[string]func(){
		"ssh-user": func() { cfg.User = o.cfg.User }, "ssh-key": func() { cfg.KeyFile = o.cfg.KeyFile },
		"ssh-port": func() { cfg.Port = o.cfg.Port }, "node-dir": func() { cfg.NodeDir = o.cfg.NodeDir },
		"ssh-known-hosts":               func() { cfg.KnownHostsFile, cfg.InsecureIgnoreHostKeys = o.cfg.KnownHostsFile, false },
		"ssh-insecure-ignore-host-keys": func() { cfg.InsecureIgnoreHostKeys, cfg.KnownHostsFile = o.cfg.InsecureIgnoreHostKeys, "" },
		"zk-setup":                      func() { cfg.ZKSetup = o.cfg.ZKSetup }, "keep-node-dirs": func() { cfg.KeepNodeDirs = o.cfg.KeepNodeDirs },
	} {
		if set[name] {
			apply()
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}
