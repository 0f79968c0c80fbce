package sqldb

import (
	"context"
	"fmt"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// MariaDB on SSH nodes (dbremote.go): independent servers, one a node, Debian's
// mariadbd and mariadb-install-db from the node's PATH, run as root, port 3306, each
// made fresh in its node directory (my.cnf, init.sql, data/, server.log). The lock's
// user and the harness's administrator are trusted from this machine's address as
// the node sees it. Every worker then comes from that one address, so ServerOf finds
// a worker's server by its connection id alone.

// StartRemoteMariaDB starts cfg's servers on the SSH nodes, one a node, and waits
// until every one serves. On error the MariaDB returned, if not nil, holds what was
// started so far: Close it.
func StartRemoteMariaDB(ctx context.Context, net *netns.Network, cfg MariaDBConfig, ssh lockservice.SSHConfig, runID string) (*MariaDB, error) {
	cfg.Nodes = len(ssh.Nodes)
	cfg.defaults()
	m := &MariaDB{dbServers: newDBServers(net, mariadbLayout, cfg.KeepAlive), cfg: cfg}
	if err := m.dialRemote(ctx, ssh, runID, cfg.Dir); err != nil {
		if m.remote == nil {
			return nil, err
		}
		return m, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	err := m.remote.Each(func(h *lockservice.SSHHost) error { return m.makeRemote(ctx, m.Servers[h.ID()-1]) })
	if err != nil {
		return m, err
	}
	if err := m.WaitServing(ctx, cfg.StartTimeout); err != nil {
		return m, err
	}
	return m, m.addUplink(ctx, net)
}

// makeRemote makes server s's node directory fresh with its configuration and
// init-file, its data directory by mariadb-install-db, and starts it.
func (m *MariaDB) makeRemote(ctx context.Context, s *Server) error {
	h := remoteHost(s)
	f := mariadbFiles{Conf: h.File("my.cnf"), Init: h.File("init.sql"), Log: h.File("server.log"), Pid: h.File("mariadb.pid"), Data: s.Data}
	files := map[string]string{
		"my.cnf":   string(mariadbConf(s.ID, m.cfg.Nodes, h.Addr(), f, m.cfg.KeepAlive)),
		"init.sql": string(mariadbInit(h.Clients(), h.Clients().Addr())),
	}
	if err := m.remote.Prepare(ctx, h, nil, files); err != nil {
		return err
	}
	install := sshnode.QuoteArgv([]string{m.cfg.InstallDB, "--defaults-file=" + f.Conf,
		"--auth-root-authentication-method=normal", "--skip-test-db"})
	script := fmt.Sprintf("cd %s\nchmod 600 %s\n%s >> %s 2>&1", sshnode.Quote(h.Dir()), sshnode.Quote(f.Init), install, sshnode.Quote(f.Log))
	if err := m.runRemote(ctx, s, "mariadb-install-db", script); err != nil {
		return err
	}
	h.SetArgv([]string{m.cfg.Binary, "--defaults-file=" + f.Conf})
	return h.Start(ctx)
}
