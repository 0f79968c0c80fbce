package etcd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// etcd on SSH nodes (run --service etcd --ssh-nodes): member N runs on node N,
// listening on the node's address (ports 2379 and 2380), its files in its node
// directory (lockservice.Remote: etcd.conf.yml, data/, server.log). The server is
// Debian's etcd from the node's PATH, or, with --etcd-version, the release built here
// (a static binary) copied into the node directory. The harness reaches the members
// from this machine's own namespace (lockservice.RootDial), the workers through the
// run network's uplink; the nemesis kills, pauses and partitions a member through
// its SSH host, as a ZooKeeper server's.

// remoteBinary is the release binary's name in a member's node directory.
const remoteBinary = "etcd"

// StartRemote starts one member on each of the SSH nodes and waits until every one
// serves. cfg.Dir receives each member's files at Close (servers/sN). On error the
// Etcd returned, if not nil, holds what was started so far: Close it.
func StartRemote(ctx context.Context, network *netns.Network, cfg Config, ssh lockservice.SSHConfig, runID string) (*Etcd, error) {
	cfg.Nodes = len(ssh.Nodes)
	if err := validateNodes(cfg.Nodes); err != nil {
		return nil, err
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	upload, err := releaseToUpload(cfg)
	if err != nil {
		return nil, err
	}
	remote, err := lockservice.DialRemote(ctx, ssh, runID, cfg.Dir, "etcd.conf.yml")
	if err != nil {
		return nil, err
	}
	e := &Etcd{InNamespaces: lockservice.InNamespaces{Net: network}, cfg: cfg, remote: remote}
	urls := make([]memberURLs, len(remote.Hosts))
	for i, a := range remote.Addrs() {
		urls[i] = addrURLs(a)
	}
	for _, h := range remote.Hosts {
		local := remote.LocalDir(h.ID())
		e.Members = append(e.Members, &lockservice.Member{ID: h.ID(), Host: h, Port: ClientPort, Dir: local,
			Conf: filepath.Join(local, "etcd.conf.yml"), Log: filepath.Join(local, "server.log")})
	}
	err = remote.Each(func(h *lockservice.SSHHost) error {
		conf := memberConf(h.ID(), urls, h.File("data"), "zlc-"+runID, "for run "+runID+" on "+h.Where())
		if err := remote.Prepare(ctx, h, nil, map[string]string{"etcd.conf.yml": string(conf)}); err != nil {
			return err
		}
		bin, err := remoteServer(ctx, h, upload)
		if err != nil {
			return err
		}
		h.SetArgv([]string{bin, "--config-file", h.File("etcd.conf.yml")})
		return nil
	})
	if err != nil {
		return e, err
	}
	return e, remote.StartAll(ctx, network, func() error { return e.WaitServing(ctx, cfg.StartTimeout) })
}

// releaseToUpload is the release binary built here that the nodes run, nil for
// Debian's etcd from each node's PATH.
func releaseToUpload(cfg Config) ([]byte, error) {
	if cfg.Binary == "" && (cfg.Version == "" || cfg.Version == Debian) {
		return nil, nil
	}
	bin, err := cfg.serverBinary()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("etcd-version %s: %w", cfg.Version, err)
	}
	return b, nil
}

// remoteServer is the server member h runs: upload copied into its node directory,
// or, when nil, Debian's etcd from the node's PATH, which must be there.
func remoteServer(ctx context.Context, h *lockservice.SSHHost, upload []byte) (string, error) {
	if upload != nil {
		if err := h.WriteFile(ctx, remoteBinary, upload, 0o755); err != nil {
			return "", fmt.Errorf("etcd member %d: copy the release to %s: %w", h.ID(), h.Where(), err)
		}
		return h.File(remoteBinary), nil
	}
	out, err := h.Run(ctx, "find etcd", "command -v etcd || true", true)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(string(out), "/") {
		return "", fmt.Errorf("etcd member %d: node %s has no etcd on its PATH: install Debian's etcd-server there (apt-get install etcd-server), or give --etcd-version %s to copy a release built here", h.ID(), h.Where(), strings.Join(Releases(), " | "))
	}
	bin, _, _ := strings.Cut(string(out), "\n")
	return bin, nil
}

// closeRemote kills the members on the nodes, copies their files back and removes
// the node directories.
func (e *Etcd) closeRemote() error {
	if err := e.remote.Close(nil, "etcd.conf.yml", "server.log"); err != nil {
		return fmt.Errorf("etcd on SSH nodes: %w", err)
	}
	return nil
}
