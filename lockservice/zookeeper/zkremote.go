package zookeeper

import (
	"context"
	"net/netip"
	"path/filepath"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// StartRemoteEnsemble starts an ensemble of len(ssh.Nodes) servers, one on each node
// (the last cfg.Observers of them observers, Members), over SSH: it checks every node
// answers first, installs ZooKeeper when asked, writes each server's zoo.cfg and myid
// into its node directory, starts the servers and waits for a quorum, then gives
// network an uplink through which the workers' namespaces reach the nodes (removed
// with the network; the harness itself reaches them from this process's namespace,
// lockservice.RootDial). cfg.Dir receives each server's files at the end (Close:
// servers/sN). On error the ensemble returned (possibly partial) must still be
// closed.
func StartRemoteEnsemble(ctx context.Context, network *netns.Network, cfg EnsembleConfig, ssh lockservice.SSHConfig, runID string) (*Ensemble, error) {
	cfg.defaults()
	cfg.Nodes = len(ssh.Nodes) - cfg.Observers
	if err := ssh.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r, err := lockservice.DialRemote(ctx, ssh, runID, cfg.Dir, "zoo.cfg")
	if err != nil {
		return nil, err
	}
	e := &Ensemble{dial: lockservice.RootDial}
	e.shutdown = func() error {
		return r.Close(func(ctx context.Context, h *lockservice.SSHHost) error {
			return e.saveSrvr(ctx, e.Servers[h.ID()-1])
		}, "zoo.cfg", "server.log")
	}
	members := cfg.Members()
	for i, h := range r.Hosts {
		local := r.LocalDir(h.ID())
		e.Servers = append(e.Servers, &Server{Member: lockservice.Member{ID: h.ID(), Host: h, Port: clientPort, Dir: local,
			Conf: filepath.Join(local, "zoo.cfg"), Log: filepath.Join(local, "server.log")}, Role: members[i].Role})
	}
	if err := r.Each(func(h *lockservice.SSHHost) error {
		return prepareRemote(ctx, r, e, cfg, ssh.ZKSetup == lockservice.ZKSetupApt, h)
	}); err != nil {
		return e, err
	}
	return e, r.StartAll(ctx, network, func() error { return e.WaitServing(ctx, cfg.StartTimeout) })
}

// prepareRemote installs ZooKeeper on h's node when apt is set, checks the install,
// and writes the server's zoo.cfg and myid into a fresh node directory.
func prepareRemote(ctx context.Context, r *lockservice.Remote, e *Ensemble, cfg EnsembleConfig, apt bool, h *lockservice.SSHHost) error {
	if apt {
		script := "DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper default-jre-headless"
		if h.Sudo() {
			script = "sudo -n env " + script
		}
		if _, err := h.Run(ctx, "apt-get install zookeeper", script, true); err != nil {
			return err
		}
	}
	cp, err := cfg.classpath(ctx, h)
	if err != nil {
		return err
	}
	addrs := make([]netip.Addr, len(e.Servers))
	members := make([]Member, len(e.Servers))
	for i, o := range e.Servers {
		addrs[i], members[i] = o.Host.Addr(), Member{ID: o.ID, Role: o.Role}
	}
	s := e.Servers[h.ID()-1]
	data := h.File("data")
	if err := r.Prepare(ctx, h, []string{"data"}, map[string]string{
		"zoo.cfg":   string(zooCfg(cfg, s.Role, h.Addr(), data, peerLines(members, addrs))),
		"data/myid": string(myid(s.ID)),
	}); err != nil {
		return err
	}
	h.SetArgv(serverCommand(h.Dir(), h.File("zoo.cfg"), cfg, cp))
	return nil
}
