package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// StartRemoteEnsemble starts an ensemble of len(ssh.Nodes) servers, one on each node
// (the last cfg.Observers of them observers, Members), over SSH: it checks every node
// answers first, installs ZooKeeper when asked, writes each server's zoo.cfg and myid
// into its node directory, starts the servers and waits for a quorum. localDir receives each server's files at the end (Close:
// servers/sN). On error the ensemble returned (possibly partial) must still be
// closed.
func StartRemoteEnsemble(ctx context.Context, cfg EnsembleConfig, ssh lockservice.SSHConfig, runID, localDir string) (*Ensemble, error) {
	cfg.defaults()
	cfg.Nodes = len(ssh.Nodes) - cfg.Observers
	if err := ssh.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	nodes, err := lockservice.DialNodes(ctx, ssh)
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
	ssh      lockservice.SSHConfig
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
		a, err := lockservice.NodeAddr(ctx, r.ssh.Nodes[i])
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
		dir := path.Join(r.ssh.RunDir(r.runID), fmt.Sprintf("s%d", id))
		h := &sshHost{id: id, node: n, addr: a, clients: netip.PrefixFrom(ap.Addr().Unmap(), 32),
			dir: dir, prefix: sshTablePrefix(r.runID), sudo: r.ssh.Defaults().User != "root"}
		local0 := filepath.Join(r.localDir, fmt.Sprintf("s%d", id))
		out[i] = &Server{Member: lockservice.Member{ID: id, Host: h, Port: clientPort, Dir: local0,
			Conf: filepath.Join(local0, "zoo.cfg"), Log: filepath.Join(local0, "server.log")}, Role: members[i].Role}
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
	if r.ssh.ZKSetup == lockservice.ZKSetupApt {
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
		sshnode.Quote(lockservice.MachineID()+" "+r.runID), sshnode.Quote(path.Join(r.ssh.RunDir(r.runID), lockservice.NodeOwnerFile)),
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
		dir := r.ssh.RunDir(r.runID)
		for i, n := range r.nodes {
			// The nodes may share a file system (the test fixture): every node
			// removes what is left.
			_, err := n.Run(ctx, sshnode.Cmd{Script: "rm -rf " + sshnode.Quote(dir), Idempotent: true, What: "remove " + dir})
			errs = append(errs, lockservice.NodeErr(n, fmt.Sprintf("node %d", i+1), err))
		}
	}
	lockservice.CloseNodes(r.nodes)
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

// startSSHEnsemble starts the ensemble on the SSH nodes for a site on network, then
// gives the network an uplink through which the workers' namespaces reach the nodes'
// addresses (removed with the network). The harness itself reaches them from this
// process's namespace (rootDial).
func startSSHEnsemble(ctx context.Context, network *netns.Network, cfg EnsembleConfig, ssh lockservice.SSHConfig, runID string) (*Ensemble, error) {
	if err := ssh.Validate(); err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, len(ssh.Nodes))
	for i, host := range ssh.Nodes {
		a, err := lockservice.NodeAddr(ctx, host)
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
