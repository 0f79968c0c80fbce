// Package testnodes is test-support code: it stands up "remote hosts" on this machine
// for the tests of SSH nodes (--ssh-nodes) and of an existing ensemble (--connect),
// since no VMs or containers are available. It is imported only by tests and by its
// own command (internal/testnodes/cmd, which scripts/zlc-ssh-nodes.sh runs).
//
// A fixture is N network namespaces zlc<id>n1..zlc<id>nN, each joined by a veth to
// the bridge zlc<id>nb in the host's own namespace. The bridge has an address, so the
// control node (the harness, in the host's namespace) reaches the nodes like real
// hosts, on a /27 of 198.51.100.0/24 (TEST-NET-2, RFC 5737: documentation only, never
// a real network, and not the runs' 10.77.0.0/16). Each node runs Debian's sshd
// (sshd -D -e -f <generated config>) on its address, port 22: a host key made for the
// fixture, root login by a key made for the fixture only. No sshd ever runs in the
// host's own namespace.
//
// The nodes share this machine's filesystem, users and installed packages: a test on
// them proves the SSH control path and the network between control node, workers and
// servers, not the install on a foreign host.
//
// The fixture claims its names with an owner file (netns.Claim), so zlockcheck
// cleanup spares it while its process lives and removes it (namespaces, sshd, bridge)
// after a crash.
package testnodes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// pool is where fixtures take their /27 from (see the package doc).
var pool = netip.MustParsePrefix("198.51.100.0/24")

// SSHD is Debian's sshd (package openssh-server).
const SSHD = "/usr/sbin/sshd"

// Config says what fixture to make.
type Config struct {
	// N is the number of nodes, 1 to 29.
	N int
	// Dir holds the fixture's keys, sshd configs, pid files and logs; it must exist.
	// Empty means a new temporary directory, removed by Close.
	Dir string
}

// Nodes is a running fixture.
type Nodes struct {
	// Addrs are the nodes' addresses, node i+1 at Addrs[i].
	Addrs []netip.Addr
	// User is the login user on every node ("root").
	User string
	// KeyFile is the private key (OpenSSH format, no passphrase) that logs in as User.
	KeyFile string
	// KnownHostsFile lists the nodes' host key for each address, known_hosts format.
	KnownHostsFile string
	// Port is sshd's port on every node.
	Port int
	// Dir is the fixture's directory; BridgeAddr the control node's address on the
	// nodes' bridge.
	Dir        string
	BridgeAddr netip.Addr

	id      string
	ownDir  bool
	subnet  *netns.Subnet
	nets    []string
	sshd    []*exec.Cmd
	sshdOut []chan struct{}
}

// Start makes the fixture: namespaces, bridge, keys, and one sshd per node, and waits
// until every sshd accepts connections. On error, what was made is removed.
func Start(ctx context.Context, cfg Config) (_ *Nodes, err error) {
	if cfg.N < 1 || cfg.N > 29 {
		return nil, fmt.Errorf("testnodes: want 1 to 29 nodes, got %d", cfg.N)
	}
	if _, err := os.Stat(SSHD); err != nil {
		return nil, fmt.Errorf("testnodes: %s not found: install Debian's openssh-server (make setup)", SSHD)
	}
	n := &Nodes{User: "root", Port: 22, Dir: cfg.Dir, id: newID()}
	if n.Dir == "" {
		if n.Dir, err = os.MkdirTemp("", "zlc-nodes-"); err != nil {
			return nil, err
		}
		n.ownDir = true
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	if n.subnet, err = netns.Claim(ctx, n.id, pool, 27); err != nil {
		return nil, fmt.Errorf("testnodes: %w", err)
	}
	n.BridgeAddr = n.subnet.Prefix.Addr().Next()
	if err := n.makeNetwork(ctx, cfg.N); err != nil {
		n.subnet.Claimed()
		return n, err
	}
	n.subnet.Claimed()
	if err := n.makeKeys(ctx); err != nil {
		return n, err
	}
	for i := range n.Addrs {
		if err := n.startSSHD(i); err != nil {
			return n, err
		}
	}
	for i := range n.Addrs {
		if err := n.waitSSHD(ctx, i, 10*time.Second); err != nil {
			return n, err
		}
	}
	return n, nil
}

func newID() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	// "t" cannot start a run's id (hex), so no run's names share this prefix.
	return "t" + hex.EncodeToString(b)
}

// Bridge is the bridge's name in the host's namespace.
func (n *Nodes) Bridge() string { return netns.Prefix + n.id + "nb" }

// Netns is node i's (from 0) namespace name.
func (n *Nodes) Netns(i int) string { return n.nets[i] }

// makeNetwork creates the bridge, the nodes' namespaces and their veths.
func (n *Nodes) makeNetwork(ctx context.Context, count int) error {
	p := n.subnet.Prefix
	br := n.Bridge()
	if err := ip(ctx, "", "link add %s type bridge\naddr add %s/%d dev %s\nlink set %s up",
		br, n.BridgeAddr, p.Bits(), br, br); err != nil {
		return err
	}
	addr := n.BridgeAddr
	for i := 1; i <= count; i++ {
		addr = addr.Next()
		ns := fmt.Sprintf("%s%sn%d", netns.Prefix, n.id, i)
		if err := exec.CommandContext(ctx, "ip", "netns", "add", ns).Run(); err != nil {
			return fmt.Errorf("testnodes: create namespace %s: %w", ns, err)
		}
		n.nets = append(n.nets, ns)
		if err := ip(ctx, "", "link add %s type veth peer name eth0 netns %s\nlink set %s master %s up",
			ns, ns, ns, br); err != nil {
			return err
		}
		if err := ip(ctx, ns, "link set lo up\naddr add %s/%d dev eth0\nlink set eth0 up\nroute add default via %s",
			addr, p.Bits(), n.BridgeAddr); err != nil {
			return err
		}
		n.Addrs = append(n.Addrs, addr)
	}
	return nil
}

// ip runs an ip batch script in namespace ns ("" is the host's).
func ip(ctx context.Context, ns, format string, args ...any) error {
	argv := []string{"-batch", "-"}
	if ns != "" {
		argv = append([]string{"-n", ns}, argv...)
	}
	cmd := exec.CommandContext(ctx, "ip", argv...)
	cmd.Stdin = strings.NewReader(fmt.Sprintf(format, args...) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testnodes: ip %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Close stops every sshd (and anything else in the nodes' namespaces), removes the
// namespaces, the bridge, the owner file, and the directory if Start made it.
func (n *Nodes) Close() error {
	var errs []error
	for i, c := range n.sshd {
		if c != nil && c.Process != nil {
			_ = c.Process.Kill()
			<-n.sshdOut[i]
		}
	}
	for _, ns := range n.nets {
		if err := netns.KillAll(ns); err != nil {
			errs = append(errs, err)
		}
		if err := exec.Command("ip", "netns", "del", ns).Run(); err != nil && netns.Exists(ns) {
			errs = append(errs, fmt.Errorf("testnodes: delete namespace %s: %w", ns, err))
		}
	}
	n.nets = nil
	if _, err := os.Stat("/sys/class/net/" + n.Bridge()); err == nil {
		if out, err := exec.Command("ip", "link", "del", n.Bridge()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("testnodes: delete bridge: %w: %s", err, out))
		}
	}
	if n.subnet != nil && len(errs) == 0 {
		n.subnet.Release()
	}
	if n.ownDir && len(errs) == 0 {
		os.RemoveAll(n.Dir)
	}
	return errors.Join(errs...)
}

// StopSSHD kills node i's (from 0) sshd, as a dead sshd on a real host: the node's
// address still answers, its port 22 refuses.
func (n *Nodes) StopSSHD(i int) error {
	if i < 0 || i >= len(n.sshd) || n.sshd[i] == nil {
		return fmt.Errorf("testnodes: no sshd on node %d", i)
	}
	_ = n.sshd[i].Process.Signal(syscall.SIGKILL)
	<-n.sshdOut[i]
	n.sshd[i] = nil
	return nil
}
