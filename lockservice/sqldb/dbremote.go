package sqldb

import (
	"context"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// A database on SSH nodes (run --service postgres|mariadb --ssh-nodes): server N runs
// on node N, Debian's server from the node's own installation, listening on the
// node's address at the kind's port, its files in its node directory
// (lockservice.Remote: data/, server.log and the configuration). The harness reaches
// the servers from this machine's own namespace (lockservice.RootDial), the workers
// through the run network's uplink, masqueraded to this machine's address as the
// nodes see it (SSHHost.Clients): the servers trust the lock's account and their
// administrator from that address only. The SSH user must be root: PostgreSQL runs
// as the node's postgres account, MariaDB as root, as in the run's namespaces.

// dialRemote connects to the SSH nodes (lockservice.DialRemote) and makes server N's
// record on node N: its host, its data directory there, and where its files come
// back at Close (localDir/sN).
func (d *dbServers) dialRemote(ctx context.Context, ssh lockservice.SSHConfig, runID, localDir string) error {
	if err := checkSSHUser(ssh, d.layout.kind.Title()); err != nil {
		return err
	}
	remote, err := lockservice.DialRemote(ctx, ssh, runID, localDir, path.Base(d.layout.conf))
	if err != nil {
		return err
	}
	d.remote = remote
	for _, h := range remote.Hosts {
		local := remote.LocalDir(h.ID())
		d.Servers = append(d.Servers, &Server{Member: lockservice.Member{ID: h.ID(), Host: h, Port: d.layout.port, Dir: local,
			Conf: filepath.Join(local, path.Base(d.layout.conf)), Log: filepath.Join(local, "server.log")}, Data: h.File("data")})
	}
	return nil
}

// remoteHost is server s's SSH host.
func remoteHost(s *Server) *lockservice.SSHHost { return s.Host.(*lockservice.SSHHost) }

// runRemote runs script on server s's node as root, an error naming the step and
// carrying the script's output.
func (d *dbServers) runRemote(ctx context.Context, s *Server, what, script string) error {
	if out, err := remoteHost(s).Run(ctx, what, "set -e\n"+script, true); err != nil {
		return d.errorf(s, fmt.Errorf("%s: %w: %s", what, err, lastLines(string(out), 8)))
	}
	return nil
}

// writeRemote is a shell fragment writing body to file name of h's node directory.
func writeRemote(h *lockservice.SSHHost, name string, body []byte) string {
	return fmt.Sprintf("printf '%%s' %s > %s\n", sshnode.Quote(string(body)), sshnode.Quote(h.File(name)))
}

// Dial opens a TCP connection from the harness to addr: from this process's own
// namespace to a server on an SSH node, else from the run network's hub.
func (d *dbServers) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	if d.remote != nil {
		return lockservice.RootDial(ctx, addr, timeout)
	}
	return d.InNamespaces.Dial(ctx, addr, timeout)
}

// addUplink gives the run's network its way to the nodes (none in namespaces).
func (d *dbServers) addUplink(ctx context.Context, network *netns.Network) error {
	if d.remote == nil {
		return nil
	}
	return d.remote.AddUplink(ctx, network)
}

// closeRemote shuts each server on an SSH node down (the layout's signal, waiting up
// to 10 s, then SIGKILL), copies its files named by the layout back and removes the
// node directories.
func (d *dbServers) closeRemote() error {
	err := d.remote.Close(func(ctx context.Context, h *lockservice.SSHHost) error {
		if err := h.Signal(ctx, d.layout.stop); err != nil {
			return nil // not running
		}
		for deadline := time.Now().Add(10 * time.Second); h.Pid() != 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		return nil
	}, d.layout.keep...)
	if err != nil {
		return fmt.Errorf("%s on SSH nodes: %w", d.layout.kind, err)
	}
	return nil
}
