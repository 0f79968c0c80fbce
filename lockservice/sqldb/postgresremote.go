package sqldb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// PostgreSQL on SSH nodes (run --service postgres --ssh-nodes): server N runs on node
// N, Debian's PostgreSQL from the node's BinDir, as its postgres account, listening on
// the node's address, port 5432, its files in its node directory (lockservice.Remote:
// data/, server.log); with two nodes, node 2 is a streaming standby of node 1, made by
// pg_basebackup. The harness reaches the servers from this machine's own namespace
// (lockservice.RootDial), the workers through the run network's uplink, masqueraded
// to this machine's address as the nodes see it: pg_hba.conf trusts the lock's role
// and the superuser from that address only, and replication from the other node. The
// SSH user must be root (initdb and the server run as the postgres account). Not
// built there: failover (it rebuilds the old primary's files on this machine) and
// --db-keepalive's retransmission bound (net.ipv4.tcp_retries2 is the node's own).

// StartRemotePostgres starts cfg's servers on the SSH nodes (a primary; with two
// nodes a standby too) and waits until every one serves. On error the Postgres
// returned, if not nil, holds what was started so far: Close it.
func StartRemotePostgres(ctx context.Context, net *netns.Network, cfg PostgresConfig, ssh lockservice.SSHConfig, runID string) (*Postgres, error) {
	cfg.defaults()
	cfg.Standby = len(ssh.Nodes) == 2
	if ssh.Defaults().User != "root" {
		return nil, errors.New("ssh-nodes: PostgreSQL on SSH nodes needs --ssh-user root (initdb and the server run as the postgres account)")
	}
	remote, err := lockservice.DialRemote(ctx, ssh, runID, cfg.Dir, "")
	if err != nil {
		return nil, err
	}
	p := &Postgres{dbServers: newDBServers(net, pgLayout, cfg.KeepAlive), cfg: cfg, remote: remote, primary: 1}
	for _, h := range remote.Hosts {
		local := remote.LocalDir(h.ID())
		p.Servers = append(p.Servers, &Server{Member: lockservice.Member{ID: h.ID(), Host: h, Port: postgresPort, Dir: local,
			Conf: filepath.Join(local, "postgresql.conf"), Log: filepath.Join(local, "server.log")}, Data: h.File("data")})
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	primary := p.Servers[0]
	if err := p.makeRemote(ctx, primary, p.initdbScript); err != nil {
		return p, err
	}
	if err := p.waitServers(ctx, cfg.StartTimeout, primary); err != nil {
		return p, err
	}
	if err := p.createLockDatabase(ctx, primary); err != nil {
		return p, err
	}
	if cfg.Standby {
		if err := p.makeRemote(ctx, p.Servers[1], p.basebackupScript); err != nil {
			return p, err
		}
	}
	if err := p.WaitServing(ctx, cfg.StartTimeout); err != nil {
		return p, err
	}
	return p, remote.AddUplink(ctx, net)
}

// makeRemote makes server s's node directory fresh, fills its data directory with
// the script data gives (as the postgres account), writes its configuration and
// starts it.
func (p *Postgres) makeRemote(ctx context.Context, s *Server, data func(h *lockservice.SSHHost) string) error {
	h := s.Host.(*lockservice.SSHHost)
	if err := p.remote.Prepare(ctx, h, nil, nil); err != nil {
		return err
	}
	var primary netip.Addr
	if s.ID != p.primaryID() {
		primary = p.Servers[p.primaryID()-1].Host.Addr()
	}
	q := sshnode.Quote
	script := fmt.Sprintf("set -e\nchown postgres: %s\ncd %[1]s\n%s\nprintf '%%s' %s > %s\nprintf '%%s' %s > %s\nchown postgres: %[4]s %[6]s",
		q(h.Dir()), data(h),
		q(string(postgresConf(s.ID, h.Addr(), primary, p.cfg.KeepAlive))), q(h.File("data/postgresql.conf")),
		q(string(p.remoteHBA(h))), q(h.File("data/pg_hba.conf")))
	if out, err := h.Run(ctx, fmt.Sprintf("make postgres server %d's data", s.ID), script, true); err != nil {
		return p.errorf(s, fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out))))
	}
	h.SetArgv(asPostgres(filepath.Join(p.cfg.BinDir, "postgres"), "-D", h.File("data")))
	return h.Start(ctx)
}

// asPostgres is argv run as the postgres account, dying with its parent.
func asPostgres(argv ...string) []string {
	return append([]string{"setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"}, argv...)
}

// initdbScript makes a fresh cluster in h's data directory (initdb, as in initdb).
func (p *Postgres) initdbScript(h *lockservice.SSHHost) string {
	return sshnode.QuoteArgv(asPostgres(filepath.Join(p.cfg.BinDir, "initdb"), "-D", h.File("data"), "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")) + " >> " + sshnode.Quote(h.File("server.log")) + " 2>&1"
}

// basebackupScript clones the primary into h's data directory, as a standby
// (basebackup's, over the nodes' network).
func (p *Postgres) basebackupScript(h *lockservice.SSHHost) string {
	primary := p.Servers[p.primaryID()-1].Host.Addr()
	return sshnode.QuoteArgv(asPostgres(filepath.Join(p.cfg.BinDir, "pg_basebackup"), "-h", primary.String(),
		"-p", fmt.Sprint(postgresPort), "-U", "postgres", "-w", "-D", h.File("data"), "--checkpoint=fast", "--no-sync", "-X", "stream")) +
		" >> " + sshnode.Quote(h.File("server.log")) + " 2>&1\ntouch " + sshnode.Quote(h.File("data/standby.signal")) +
		"\nchown postgres: " + sshnode.Quote(h.File("data/standby.signal"))
}

// remoteHBA is pg_hba.conf on an SSH node: the superuser and the lock's role from
// this machine's address as the node sees it (the harness, and the workers
// masqueraded to it), replication from the other nodes.
func (p *Postgres) remoteHBA(h *lockservice.SSHHost) []byte {
	clients := h.Clients()
	lines := []string{
		dbMarker + ": trust only from " + clients.String() + " (the harness and the workers) and the other nodes",
		"# TYPE  DATABASE     USER      ADDRESS  METHOD",
		fmt.Sprintf("host    all          postgres  %s  trust", clients),
		fmt.Sprintf("host    %s          %s       %s  trust", DatabaseName, DatabaseUser, clients),
	}
	for _, s := range p.Servers {
		a := s.Host.Addr()
		lines = append(lines, fmt.Sprintf("host    replication  postgres  %s  trust", netip.PrefixFrom(a, a.BitLen())))
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// Dial opens a TCP connection from the harness to addr: from this process's own
// namespace to a server on an SSH node, else from the run network's hub.
func (p *Postgres) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	if p.remote != nil {
		return lockservice.RootDial(ctx, addr, timeout)
	}
	return p.InNamespaces.Dial(ctx, addr, timeout)
}

// closeRemote shuts each server down (SIGQUIT, an immediate shutdown that removes
// its shared memory, then SIGKILL), copies its configuration and log back and
// removes the node directories.
func (p *Postgres) closeRemote() error {
	err := p.remote.Close(func(ctx context.Context, h *lockservice.SSHHost) error {
		if err := h.Signal(ctx, syscall.SIGQUIT); err != nil {
			return nil // not running
		}
		for deadline := time.Now().Add(10 * time.Second); h.Pid() != 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		return nil
	}, "data/postgresql.conf", "data/pg_hba.conf", "server.log")
	if err != nil {
		return fmt.Errorf("postgres on SSH nodes: %w", err)
	}
	return nil
}
