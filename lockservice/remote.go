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
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Remote is a run's servers on SSH nodes (SSHConfig), one a node, whatever their
// kind: the connections to the nodes and each server's SSHHost, its node directory
// NodeDir/zlc<run>/s<id> (with the run's owner file, which the sweep reads). A kind
// that runs on SSH nodes dials them (DialRemote), writes each server's files
// (Prepare), sets its command line (SSHHost.SetArgv) and starts it; Close kills every
// server, copies its files back and removes the node directories.
type Remote struct {
	ssh      SSHConfig
	runID    string
	localDir string
	nodes    []*sshnode.Node
	// Hosts are the servers' hosts, server N on node N at Hosts[N-1].
	Hosts []*SSHHost
}

// DialRemote connects to every node and makes each server's host: its node
// directory, the node's address, this machine's address as the node sees it (the
// workers' traffic is masqueraded to it), and another node's (the link towards the
// peers). conf names the server's configuration file in its node directory ("" for
// none: the host then knows its server by its working directory alone). localDir
// receives each server's files at Close (localDir/sN). On error nothing is left open.
func DialRemote(ctx context.Context, ssh SSHConfig, runID, localDir, conf string) (*Remote, error) {
	if err := ssh.Validate(); err != nil {
		return nil, err
	}
	nodes, err := DialNodes(ctx, ssh)
	if err != nil {
		return nil, err
	}
	r := &Remote{ssh: ssh, runID: runID, localDir: localDir, nodes: nodes}
	addrs := make([]netip.Addr, len(nodes))
	for i, n := range nodes {
		a, err := NodeAddr(ctx, ssh.Nodes[i])
		if err != nil {
			CloseNodes(nodes)
			return nil, err
		}
		local, err := n.LocalAddr(ctx)
		var ap netip.AddrPort
		if err == nil {
			ap, err = netip.ParseAddrPort(local.String())
		}
		if err != nil {
			CloseNodes(nodes)
			return nil, fmt.Errorf("node %s: this machine's address: %w", n, err)
		}
		addrs[i] = a
		id := i + 1
		r.Hosts = append(r.Hosts, &SSHHost{id: id, node: n, addr: a, clients: netip.PrefixFrom(ap.Addr().Unmap(), 32),
			dir: path.Join(ssh.RunDir(runID), fmt.Sprintf("s%d", id)), conf: conf, prefix: SSHTablePrefix(runID),
			sudo: ssh.Defaults().User != "root"})
	}
	if len(addrs) > 1 {
		for i, h := range r.Hosts {
			h.peer = addrs[(i+1)%len(addrs)]
		}
	}
	return r, nil
}

// SSHTablePrefix is the nftables table prefix of a run on shared nodes: zlc_<run>_.
func SSHTablePrefix(runID string) string { return nemesis.TablePrefix + runID + "_" }

// Addrs are the nodes' addresses, node N's at [N-1].
func (r *Remote) Addrs() []netip.Addr {
	out := make([]netip.Addr, len(r.Hosts))
	for i, h := range r.Hosts {
		out[i] = h.addr
	}
	return out
}

// LocalDir is where server id's files come back at Close.
func (r *Remote) LocalDir(id int) string { return filepath.Join(r.localDir, fmt.Sprintf("s%d", id)) }

// Each runs f for every server's host at once.
func (r *Remote) Each(f func(h *SSHHost) error) error {
	errs := make([]error, len(r.Hosts))
	var wg sync.WaitGroup
	for i, h := range r.Hosts {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(h) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Prepare makes h's node directory fresh, with the run's owner file (which
// machine's harness the run is: the sweep reads it), the subdirectories dirs and
// files (name relative to the node directory: content), in one round trip.
func (r *Remote) Prepare(ctx context.Context, h *SSHHost, dirs []string, files map[string]string) error {
	script := fmt.Sprintf("rm -rf %s && mkdir -p %[1]s && printf '%%s\\n' %s > %s", sshnode.Quote(h.dir),
		sshnode.Quote(MachineID()+" "+r.runID), sshnode.Quote(path.Join(r.ssh.RunDir(r.runID), NodeOwnerFile)))
	for _, d := range dirs {
		script += " && mkdir -p " + sshnode.Quote(h.file(d))
	}
	for name, body := range files {
		script += fmt.Sprintf(" && printf '%%s' %s > %s", sshnode.Quote(body), sshnode.Quote(h.file(name)))
	}
	_, err := h.run(ctx, "write the server's files", script, true)
	return err
}

// Close ends the servers: for each, before (when set: an answer to save while it
// lives), then its kill, then its files named keep copied into LocalDir; then the
// node directories are removed (unless SSHConfig.KeepNodeDirs) and the connections
// closed. It goes on past errors and reports them all.
func (r *Remote) Close(before func(context.Context, *SSHHost) error, keep ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := []error{r.Each(func(h *SSHHost) error {
		var errs []error
		if before != nil && h.Started() {
			errs = append(errs, before(ctx, h))
		}
		errs = append(errs, h.Kill(ctx), r.collect(ctx, h, keep))
		return errors.Join(errs...)
	})}
	if !r.ssh.KeepNodeDirs {
		dir := r.ssh.RunDir(r.runID)
		for i, n := range r.nodes {
			// The nodes may share a file system (the test fixture): every node
			// removes what is left.
			_, err := n.Run(ctx, sshnode.Cmd{Script: "rm -rf " + sshnode.Quote(dir), Idempotent: true, What: "remove " + dir})
			errs = append(errs, NodeErr(n, fmt.Sprintf("node %d", i+1), err))
		}
	}
	CloseNodes(r.nodes)
	return errors.Join(errs...)
}

// collect copies h's files named keep into LocalDir (a file missing is an error only
// for a server that was started).
func (r *Remote) collect(ctx context.Context, h *SSHHost, keep []string) error {
	local := r.LocalDir(h.id)
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, name := range keep {
		data, err := h.node.ReadFile(ctx, h.file(name))
		if err != nil {
			if h.Started() {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(local, path.Base(name)), data, 0o644))
	}
	return errors.Join(errs...)
}

// StartAll starts every server, waits until wait says they all serve, and then
// gives network the uplink the workers reach the nodes through: the end of a kind's
// start on SSH nodes, once each server's files and command line are set.
func (r *Remote) StartAll(ctx context.Context, network *netns.Network, wait func() error) error {
	if err := r.Each(func(h *SSHHost) error { return h.Start(ctx) }); err != nil {
		return err
	}
	if err := wait(); err != nil {
		return err
	}
	return r.AddUplink(ctx, network)
}

// AddUplink gives the run's network an uplink through which the workers' namespaces
// reach the nodes' addresses (removed with the network).
func (r *Remote) AddUplink(ctx context.Context, network *netns.Network) error {
	if err := network.AddUplink(ctx, r.Addrs()); err != nil {
		return fmt.Errorf("uplink to the SSH nodes: %w", err)
	}
	return nil
}

// RootDial dials from this process's own network namespace: the harness reaches SSH
// nodes the way it reaches them over SSH, whatever the run's namespaces do.
func RootDial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.DialContext(ctx, "tcp", addr)
}
