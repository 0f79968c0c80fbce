package lockservice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
)

// DefaultNodeDir is where a run on SSH nodes keeps its files on each node:
// DefaultNodeDir/zlc<run>/s<id>.
const DefaultNodeDir = "/var/tmp/zlockcheck"

// ZKSetupApt installs Debian's zookeeper package (and a JRE) on each node first.
const ZKSetupApt = "apt"

// SSHConfig runs the ensemble on real hosts reached over SSH instead of in network
// namespaces of this machine (see docs/remote.md, "Real hosts over SSH"). It is recorded in
// config.json (the key file's path, never the key).
type SSHConfig struct {
	// Nodes are the hosts (names or IPv4 addresses), one server each: server N runs
	// on Nodes[N-1].
	Nodes []string `json:"nodes"`
	// Config says how to log in.
	sshnode.Config
	// ZKSetup, when "apt", installs zookeeper and a JRE with apt-get on each node
	// before the run; empty uses the install already there (Config.ZKHome, or
	// Debian's package).
	ZKSetup string `json:"zk_setup,omitempty"`
	// NodeDir holds the run's directory on each node (default DefaultNodeDir): the
	// run's files are in NodeDir/zlc<run>/s<id>, which cleanup finds by that name.
	NodeDir string `json:"node_dir,omitempty"`
	// KeepNodeDirs leaves the nodes' directories (data, logs) after the run.
	KeepNodeDirs bool `json:"keep_node_dirs,omitempty"`
}

// Validate reports a configuration that cannot work, naming the flag.
func (c SSHConfig) Validate() error {
	if len(c.Nodes) == 0 {
		return errors.New("ssh-nodes: no nodes")
	}
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		if n == "" || strings.ContainsAny(n, " \t/@,") {
			return fmt.Errorf("ssh-nodes: %q is not a host name or address", n)
		}
		if seen[n] {
			return fmt.Errorf("ssh-nodes: %s given twice (one server per node)", n)
		}
		seen[n] = true
	}
	if c.ZKSetup != "" && c.ZKSetup != ZKSetupApt {
		return fmt.Errorf("zk-setup: want %q or nothing, got %q", ZKSetupApt, c.ZKSetup)
	}
	if c.NodeDir != "" && (!path.IsAbs(c.NodeDir) || path.Clean(c.NodeDir) == "/") {
		return fmt.Errorf("node-dir: want an absolute directory other than /, got %q", c.NodeDir)
	}
	return c.Config.Validate()
}

// runDir is the run's directory on every node.
func (c SSHConfig) runDir(runID string) string {
	base := c.NodeDir
	if base == "" {
		base = DefaultNodeDir
	}
	return path.Join(base, "zlc"+runID)
}

// dialNodes connects to every node at once; the error names each node that failed.
func dialNodes(ctx context.Context, c SSHConfig) ([]*sshnode.Node, error) {
	nodes := make([]*sshnode.Node, len(c.Nodes))
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, host := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = sshnode.Dial(ctx, host, c.Config)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("node %d (%s): %w", i+1, host, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeNodes(nodes)
		return nil, fmt.Errorf("ssh-nodes: cannot reach every node: %w", err)
	}
	return nodes, nil
}

func closeNodes(nodes []*sshnode.Node) {
	for _, n := range nodes {
		if n != nil {
			_ = n.Close()
		}
	}
}

// nodeAddr is host's IPv4 address (host may be a name).
func nodeAddr(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("ssh-nodes: %s: no IPv4 address: %v", host, err)
	}
	return addrs[0].Unmap(), nil
}

// StartRemoteEnsemble starts an ensemble of len(ssh.Nodes) servers, one on each node
// (the last cfg.Observers of them observers, Members), over SSH: it checks every node
// answers first, installs ZooKeeper when asked, writes each server's zoo.cfg and myid
// into its node directory, starts the servers and waits for a quorum. localDir receives each server's files at the end (Close:
// servers/sN). On error the ensemble returned (possibly partial) must still be
// closed.
func StartRemoteEnsemble(ctx context.Context, cfg EnsembleConfig, ssh SSHConfig, runID, localDir string) (*Ensemble, error) {
	cfg.defaults()
	cfg.Nodes = len(ssh.Nodes) - cfg.Observers
	if err := ssh.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	nodes, err := dialNodes(ctx, ssh)
	if err != nil {
		return nil, err
	}
	r := &remote{ssh: ssh, runID: runID, localDir: localDir, nodes: nodes}
	e := &Ensemble{dial: rootDial, shutdown: func() error { return r.close() }}
	r.ens = e
	if e.Servers, err = r.servers(ctx, cfg); err != nil {
		return e, err
	}
	if err := r.each(func(s *Server) error { return r.prepare(ctx, cfg, s) }); err != nil {
		return e, err
	}
	if err := r.each(func(s *Server) error { return s.Host.Start(ctx) }); err != nil {
		return e, err
	}
	return e, e.WaitServing(ctx, cfg.StartTimeout)
}

// rootDial dials from this process's own network namespace: the harness reaches SSH
// nodes the way it reaches them over SSH, whatever the run's namespaces do.
func rootDial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.DialContext(ctx, "tcp", addr)
}

// remote is an ensemble on SSH nodes, as its shutdown needs it.
type remote struct {
	ssh      SSHConfig
	runID    string
	localDir string
	nodes    []*sshnode.Node
	ens      *Ensemble
}

// servers makes each node's host and Server: the addresses, the link towards the
// peers, the node directory.
func (r *remote) servers(ctx context.Context, cfg EnsembleConfig) ([]*Server, error) {
	out := make([]*Server, len(r.nodes))
	addrs := make([]netip.Addr, len(r.nodes))
	members := cfg.Members()
	for i, n := range r.nodes {
		a, err := nodeAddr(ctx, r.ssh.Nodes[i])
		if err != nil {
			return nil, err
		}
		local, err := n.LocalAddr(ctx)
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(local.String())
		if err != nil {
			return nil, fmt.Errorf("node %s: this machine's address %s: %w", n, local, err)
		}
		addrs[i] = a
		id := i + 1
		dir := path.Join(r.ssh.runDir(r.runID), fmt.Sprintf("s%d", id))
		h := &sshHost{id: id, node: n, addr: a, clients: netip.PrefixFrom(ap.Addr().Unmap(), 32),
			dir: dir, prefix: sshTablePrefix(r.runID), sudo: r.ssh.Defaults().User != "root"}
		local0 := filepath.Join(r.localDir, fmt.Sprintf("s%d", id))
		out[i] = &Server{ID: id, Role: members[i].Role, Host: h, Dir: local0, Cfg: filepath.Join(local0, "zoo.cfg"), Log: filepath.Join(local0, "server.log")}
	}
	for i, s := range out {
		s.Host.(*sshHost).peer = addrs[(i+1)%len(addrs)]
		if len(addrs) == 1 {
			s.Host.(*sshHost).peer = netip.Addr{}
		}
	}
	return out, nil
}

// each runs f for every server at once.
func (r *remote) each(f func(s *Server) error) error {
	errs := make([]error, len(r.ens.Servers))
	var wg sync.WaitGroup
	for i, s := range r.ens.Servers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(s) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepare installs ZooKeeper when asked, checks the install, and writes the server's
// files into a fresh node directory.
func (r *remote) prepare(ctx context.Context, cfg EnsembleConfig, s *Server) error {
	h := s.Host.(*sshHost)
	if r.ssh.ZKSetup == ZKSetupApt {
		script := "DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper default-jre-headless"
		if h.sudo {
			script = "sudo -n env " + script
		}
		if _, err := h.run(ctx, "apt-get install zookeeper", script, true); err != nil {
			return err
		}
	}
	cp, err := cfg.classpath(ctx, h)
	if err != nil {
		return err
	}
	addrs := make([]netip.Addr, len(r.ens.Servers))
	members := make([]Member, len(r.ens.Servers))
	for i, o := range r.ens.Servers {
		addrs[i], members[i] = o.Host.Addr(), Member{ID: o.ID, Role: o.Role}
	}
	// One round trip: a fresh directory with zoo.cfg and data/myid, and the run's
	// owner file (which machine's harness the run is: sweepNodes).
	data := path.Join(h.dir, "data")
	script := fmt.Sprintf("rm -rf %s && mkdir -p %s && printf '%%s\\n' %s > %s && printf '%%s' %s > %s && printf '%%s' %s > %s",
		sshnode.Quote(h.dir), sshnode.Quote(data),
		sshnode.Quote(machineID()+" "+r.runID), sshnode.Quote(path.Join(r.ssh.runDir(r.runID), nodeOwnerFile)),
		sshnode.Quote(string(zooCfg(cfg, s.Role, h.addr, data, peerLines(members, addrs)))), sshnode.Quote(h.file("zoo.cfg")),
		sshnode.Quote(string(myid(s.ID))), sshnode.Quote(path.Join(data, "myid")))
	if _, err := h.run(ctx, "write zoo.cfg and myid", script, true); err != nil {
		return err
	}
	h.argv = serverCommand(h.dir, h.file("zoo.cfg"), cfg, cp)
	return nil
}

// close ends the remote ensemble: each server's srvr answer, then the servers are
// killed and their zoo.cfg and server.log copied into localDir/sN, then the node
// directories are removed (unless KeepNodeDirs) and the connections closed. It goes
// on past errors and reports them all.
func (r *remote) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	if len(r.ens.Servers) > 0 {
		errs = append(errs, r.each(func(s *Server) error { return r.collect(ctx, s) }))
	}
	if !r.ssh.KeepNodeDirs {
		dir := r.ssh.runDir(r.runID)
		for i, n := range r.nodes {
			// The nodes may share a file system (the test fixture): every node
			// removes what is left.
			_, err := n.Run(ctx, sshnode.Cmd{Script: "rm -rf " + sshnode.Quote(dir), Idempotent: true, What: "remove " + dir})
			errs = append(errs, errNode(n, fmt.Sprintf("node %d", i+1), err))
		}
	}
	closeNodes(r.nodes)
	return errors.Join(errs...)
}

// collect saves s's srvr answer, kills it and copies its files back.
func (r *remote) collect(ctx context.Context, s *Server) error {
	h := s.Host.(*sshHost)
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	var errs []error
	if h.argv != nil {
		errs = append(errs, r.ens.saveSrvr(ctx, s))
	}
	errs = append(errs, h.Kill(ctx))
	for _, name := range []string{"zoo.cfg", "server.log"} {
		data, err := h.node.ReadFile(ctx, h.file(name))
		if err != nil {
			if h.argv != nil {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(s.Dir, name), data, 0o644))
	}
	return errors.Join(errs...)
}

// CleanupNodes removes from every node what any run on SSH nodes may have left: the
// nftables tables named zlc_..., the ZooKeeper servers started from a node directory
// (their command line names NodeDir/zlc...), and those directories. It returns what
// it removed, one line each, and goes on past a node it cannot reach.
func CleanupNodes(ctx context.Context, c SSHConfig) ([]string, error) {
	return sweepNodes(ctx, c, true)
}

// sweepNodes removes from every node what runs left there: every run's leftovers
// when all is set, else only those of runs this machine started whose harness is
// dead (their node directory's owner file names this machine and a run id no live
// owner here has: netns.Owned). A run of another machine is never touched then: this
// machine cannot know whether its harness lives.
func sweepNodes(ctx context.Context, c SSHConfig, all bool) ([]string, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	nft := "nft"
	if c.Defaults().User != "root" {
		nft = "sudo -n nft"
	}
	base := path.Dir(c.runDir("x"))
	nodes := make([]shell, 0, len(c.Nodes))
	var errs []error
	for _, host := range c.Nodes {
		n, err := sshnode.Dial(ctx, host, c.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", host, err))
			continue
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	// First what is on every node, then whose it is: an owner here is made before
	// anything on the nodes is named after it. Then each node removes the dead
	// runs' (the nodes may share a file system, as the test fixture's do).
	var ids []string
	if !all {
		found := map[string]bool{}
		for _, n := range nodes {
			dead, err := deadRunsOn(ctx, n, base, machineID())
			errs = append(errs, err)
			for _, id := range dead {
				found[id] = true
			}
		}
		if len(found) == 0 {
			return nil, errors.Join(errs...)
		}
		for id := range found {
			ids = append(ids, id)
		}
		sort.Strings(ids)
	}
	var out []string
	for _, n := range nodes {
		lines, err := sweepNode(ctx, n, base, nft, ids)
		out = append(out, lines...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// deadRunsOn lists the runs with a directory under base on node n that this
// machine (machine) started and whose owner here is dead.
func deadRunsOn(ctx context.Context, n shell, base, machine string) ([]string, error) {
	text, err := n.Run(ctx, sshnode.Cmd{Script: listOwnersScript(base), Idempotent: true, What: "list run owners"})
	if err != nil {
		return nil, errNode(n, n.String(), err)
	}
	return deadNodeRuns(string(text), base, machine), nil
}

// sweepNode removes from node n the leftovers of runs ids (nil: every run's), and
// says what it removed, one line each ("node: what").
func sweepNode(ctx context.Context, n shell, base, nft string, ids []string) ([]string, error) {
	text, err := n.Run(ctx, sshnode.Cmd{Script: cleanupScript(base, nft, ids), Idempotent: true, What: "cleanup"})
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if l != "" {
			out = append(out, n.String()+": "+l)
		}
	}
	if err != nil {
		return out, errNode(n, n.String(), err)
	}
	return out, nil
}

// nodeOwnerFile is the file in a run's node directory that names the machine whose
// harness started the run, and the run: "<machine> <run id>".
const nodeOwnerFile = "owner"

// machineID names this machine to the nodes: /etc/machine-id, else its host name.
func machineID() string {
	if b, err := os.ReadFile("/etc/machine-id"); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return "host-" + strings.ReplaceAll(h, " ", "_")
}

// listOwnersScript prints, for each run directory under base with an owner file,
// "<directory> <machine> <run id>".
func listOwnersScript(base string) string {
	return fmt.Sprintf(`for f in %s/zlc*/%s; do [ -f "$f" ] || continue; printf '%%s %%s\n' "${f%%/*}" "$(head -n 1 "$f")"; done; true`,
		sshnode.Quote(base), nodeOwnerFile)
}

// deadNodeRuns picks from listOwnersScript's output the ids of the runs that machine
// started whose owner here is dead.
func deadNodeRuns(text, base, machine string) []string {
	var ids []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != machine || !nodeRunID.MatchString(f[2]) || f[0] != path.Join(base, "zlc"+f[2]) {
			continue
		}
		if !netns.Owned(netns.Prefix + f[2]) {
			ids = append(ids, f[2])
		}
	}
	return ids
}

// nodeRunID is what a run id looks like.
var nodeRunID = regexp.MustCompile(`^[a-z0-9]{1,8}$`)

// cleanupScript is the sweep's script for a node: base is the node directory's
// parent, nft the command that runs nft; ids the runs whose leftovers it removes (nil:
// every run's).
func cleanupScript(base, nft string, ids []string) string {
	table, dir := "zlc_*", "zlc"
	if ids != nil {
		table, dir = "", ""
		for i, id := range ids {
			if i > 0 {
				table += "|"
			}
			table += "zlc_" + id + "_*"
		}
	}
	var b strings.Builder
	b.WriteString(sigGroup)
	fmt.Fprintf(&b, "base=%s\n", sshnode.Quote(base))
	fmt.Fprintf(&b, `%[1]s list tables 2>/dev/null | while read -r kw fam name; do
  case "$name" in %[2]s) %[1]s delete table "$fam" "$name" && echo "nftables table $fam $name";; esac
done
`, nft, table)
	marks := []string{dir}
	if ids != nil {
		marks = marks[:0]
		for _, id := range ids {
			marks = append(marks, "zlc"+id+"/")
		}
	}
	for _, m := range marks {
		fmt.Fprintf(&b, `for p in /proc/[0-9]*; do
  pid=${p#/proc/}; [ "$pid" = "$$" ] && continue
  grep -qaF QuorumPeerMain $p/cmdline 2>/dev/null && grep -qaF "$base/%s" $p/cmdline 2>/dev/null || continue
  sigGroup KILL $pid || kill -s KILL $pid; echo "server process $pid"
done
`, m)
	}
	if ids == nil {
		b.WriteString(`for d in "$base"/zlc*; do [ -e "$d" ] || continue; rm -rf "$d" && echo "directory $d"; done
`)
	} else {
		for _, id := range ids {
			fmt.Fprintf(&b, `d="$base/zlc%s"; [ -e "$d" ] && rm -rf "$d" && echo "directory $d"
`, id)
		}
	}
	b.WriteString("true")
	return b.String()
}

// startSSHEnsemble starts the ensemble on the SSH nodes for a site on network, then
// gives the network an uplink through which the workers' namespaces reach the nodes'
// addresses (removed with the network). The harness itself reaches them from this
// process's namespace (rootDial).
func startSSHEnsemble(ctx context.Context, network *netns.Network, cfg EnsembleConfig, ssh SSHConfig, runID string) (*Ensemble, error) {
	if err := ssh.Validate(); err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, len(ssh.Nodes))
	for i, host := range ssh.Nodes {
		a, err := nodeAddr(ctx, host)
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	e, err := StartRemoteEnsemble(ctx, cfg, ssh, runID, cfg.Dir)
	if err != nil {
		return e, err
	}
	if err := network.AddUplink(ctx, addrs); err != nil {
		return e, fmt.Errorf("uplink to the SSH nodes: %w", err)
	}
	return e, nil
}
