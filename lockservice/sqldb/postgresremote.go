package sqldb

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// PostgreSQL on SSH nodes (dbremote.go): Debian's PostgreSQL from the node's BinDir,
// run as its postgres account, port 5432; with two nodes, node 2 is a streaming
// standby of node 1, made by pg_basebackup over the nodes' network, and failover
// rebuilds the old primary on its own node from the new one. pg_hba.conf also
// trusts replication from the other node. Not built there: --db-keepalive's
// retransmission bound (net.ipv4.tcp_retries2 is the node's own).

// StartRemotePostgres starts cfg's servers on the SSH nodes (a primary; with two
// nodes a standby too) and waits until every one serves. On error the Postgres
// returned, if not nil, holds what was started so far: Close it.
func StartRemotePostgres(ctx context.Context, net *netns.Network, cfg PostgresConfig, ssh lockservice.SSHConfig, runID string) (*Postgres, error) {
	cfg.defaults()
	cfg.Standby = len(ssh.Nodes) == 2
	p := &Postgres{dbServers: newDBServers(net, pgLayout, cfg.KeepAlive), cfg: cfg, primary: 1}
	if err := p.dialRemote(ctx, ssh, runID, cfg.Dir); err != nil {
		if p.remote == nil {
			return nil, err
		}
		return p, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	primary := p.Servers[0]
	if err := p.makeRemote(ctx, primary, true, p.initdbScript); err != nil {
		return p, err
	}
	if err := p.waitServers(ctx, cfg.StartTimeout, primary); err != nil {
		return p, err
	}
	if err := p.createLockDatabase(ctx, primary); err != nil {
		return p, err
	}
	if cfg.Standby {
		if err := p.makeRemote(ctx, p.Servers[1], true, p.basebackupScript); err != nil {
			return p, err
		}
	}
	if err := p.WaitServing(ctx, cfg.StartTimeout); err != nil {
		return p, err
	}
	return p, p.addUplink(ctx, net)
}

// makeRemote makes server s's node directory fresh (or, unless fresh, removes only
// its data directory and a shared memory segment its killed postmaster left), fills
// the data directory with the script data gives (as the postgres account), writes
// its configuration and starts it.
func (p *Postgres) makeRemote(ctx context.Context, s *Server, fresh bool, data func(h *lockservice.SSHHost) string) error {
	h := remoteHost(s)
	clear := removeLeftSegmentScript(h) + "rm -rf " + sshnode.Quote(h.File("data")) + "\n"
	if fresh {
		if err := p.remote.Prepare(ctx, h, nil, nil); err != nil {
			return err
		}
		clear = ""
	}
	var primary netip.Addr
	if s.ID != p.primaryID() {
		primary = p.Servers[p.primaryID()-1].Host.Addr()
	}
	q := sshnode.Quote
	script := clear + fmt.Sprintf("chown postgres: %s\ncd %[1]s\n%s\n", q(h.Dir()), data(h)) +
		writeRemote(h, "data/postgresql.conf", postgresConf(s.ID, h.Addr(), primary, p.cfg.KeepAlive)) +
		writeRemote(h, "data/pg_hba.conf", p.remoteHBA(h)) +
		fmt.Sprintf("chown postgres: %s %s", q(h.File("data/postgresql.conf")), q(h.File("data/pg_hba.conf")))
	if err := p.runRemote(ctx, s, "make the data directory", script); err != nil {
		return err
	}
	h.SetArgv(asPostgres(filepath.Join(p.cfg.BinDir, "postgres"), "-D", h.File("data")))
	return h.Start(ctx)
}

// removeLeftSegmentScript is a shell fragment that removes the System V shared
// memory segment a killed postmaster on h left (removeLeftSegment, on the node: the
// id on postmaster.pid's seventh line, when nothing is attached to it).
func removeLeftSegmentScript(h *lockservice.SSHHost) string {
	return fmt.Sprintf(`set -- $(sed -n 7p %s 2>/dev/null)
if [ $# = 2 ] && ipcs -m -i "$2" 2>/dev/null | grep -q 'nattch=0'; then ipcrm -m "$2" || true; fi
`, sshnode.Quote(h.File("data/postmaster.pid")))
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
