package testnodes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdPort is the test etcd's client port: not 2379, so that a --connect run must
// take the port from its address.
const etcdPort = 2389

// StartEtcd starts a one-member etcd (Debian's) on node 1's address, in its
// namespace, outside any tool's management, its data in dir; stop kills it.
func (n *Nodes) StartEtcd(ctx context.Context, dir string) (addr string, stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	a := netip.AddrPortFrom(n.Addrs[0], etcdPort).String()
	peer := netip.AddrPortFrom(n.Addrs[0], etcdPort+1).String()
	argv := []string{"ip", "netns", "exec", n.nets[0], "/usr/bin/etcd", "--name", "team", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://" + a, "--advertise-client-urls", "http://" + a,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", "team=http://" + peer, "--logger", "zap"}
	stop, err = startProcess(argv, filepath.Join(dir, "server.log"))
	if err != nil {
		return "", nil, fmt.Errorf("testnodes: start etcd: %w", err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{a}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", nil, errors.Join(err, stop())
	}
	defer c.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Get(gctx, "zlc-test")
		cancel()
		if err == nil {
			return a, stop, nil
		}
		if time.Now().After(deadline) {
			return "", nil, errors.Join(fmt.Errorf("testnodes: etcd on %s does not answer: %w", a, err), stop())
		}
	}
}
