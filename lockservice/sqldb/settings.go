package sqldb

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Settings are a run's choices about its PostgreSQL or MariaDB servers, which share
// them: its section of config.json ("settings").
type Settings struct {
	// KeepAlive bounds how long a server keeps the session of a client that vanished
	// without closing its connection, and its locks (the servers' TCP keepalive,
	// DBKeepAlive). 0 leaves it to the kernel: 2 h 11 min.
	KeepAlive time.Duration `json:"keepalive_ns,omitempty"`
}

var (
	_ lockservice.Settings    = Settings{}
	_ lockservice.RowAdjuster = Settings{}
)

func init() {
	lockservice.RegisterSettings(lockservice.SettingsSpec{
		Kinds: []kind.Name{kind.Postgres, kind.MariaDB}, Title: "database settings", Zero: Settings{},
		Flags: flags, Legacy: legacy,
	})
}

// flags defines the databases' flag on fs.
func flags(fs *flag.FlagSet) func() (lockservice.Settings, error) {
	var s Settings
	fs.DurationVar(&s.KeepAlive, "db-keepalive", 0, "with --service postgres or mariadb: the servers give up on a client that vanished without closing its connection (and free its session's locks) about this long after its last packet (their TCP keepalive; 0: the kernel's 2h11m)")
	return func() (lockservice.Settings, error) { return s, nil }
}

// legacy reads the settings from a config.json written before they had a section:
// its db_keepalive_ns key.
func legacy(flat map[string]json.RawMessage) (lockservice.Settings, error) {
	var s Settings
	if raw, ok := flat["db_keepalive_ns"]; ok {
		if err := json.Unmarshal(raw, &s.KeepAlive); err != nil {
			return nil, fmt.Errorf("db_keepalive_ns: %w", err)
		}
	}
	return s, nil
}

// Defaults counts an existing PostgreSQL's servers (the --connect URL's hosts) when
// no --nodes was given; the rest is the catalogue's.
func (s Settings) Defaults(p lockservice.Plan) (lockservice.Settings, lockservice.Plan) {
	if p.Kind == kind.Postgres && p.SSH != nil {
		p.Nodes = len(p.SSH.Nodes) // a primary, and a standby on a second node
	}
	if p.Connect != "" && p.Nodes == 0 {
		if hosts, err := connectHosts(p); err == nil {
			p.Nodes = len(hosts) // Validate says what is wrong with the servers, if anything
		}
	}
	return s, p
}

// ForRow gives a PostgreSQL row a primary and a standby, unless told its nodes, so
// that failover runs.
func (s Settings) ForRow(p lockservice.Plan) lockservice.Plan {
	if p.Kind == kind.Postgres && p.Nodes == 0 {
		p.Nodes = 2
	}
	return p
}

// Validate refuses what a run on PostgreSQL or MariaDB cannot do (yet).
func (s Settings) Validate(p lockservice.Plan) error {
	title := p.Kind.Title()
	switch {
	case s.KeepAlive < 0:
		return fmt.Errorf("db-keepalive: %s is negative (0 leaves the kernel's keepalive)", s.KeepAlive)
	case p.Connect != "":
		return s.validateConnect(p)
	case p.SSH != nil && checkSSHUser(*p.SSH, title) != nil:
		return checkSSHUser(*p.SSH, title)
	case p.Processes:
		return fmt.Errorf("baseline-processes: there is no plain %s client loop as processes (--baseline runs it as goroutines)", title)
	case p.Kind == kind.Postgres && p.Nodes > 2:
		return fmt.Errorf("nodes: PostgreSQL runs a primary (--nodes 1) or a primary and a streaming standby (--nodes 2), not %d servers", p.Nodes)
	case p.Kind == kind.Postgres && p.Nodes < 2 && slices.Contains(p.Faults, nemesis.ClassFailover):
		return errors.New("nemesis failover: promotes the standby: it needs --nodes 2 (a primary and a streaming standby)")
	}
	return nil
}

// Server is the servers' configuration for the run (start): PostgreSQL's or
// MariaDB's.
func (s Settings) Server(p lockservice.Plan, _ string) any {
	if p.Kind == kind.MariaDB {
		return MariaDBConfig{Nodes: p.Nodes, KeepAlive: s.KeepAlive}
	}
	return PostgresConfig{Standby: p.Nodes == 2, KeepAlive: s.KeepAlive}
}

// Describe names the servers in the run's log.
func (s Settings) Describe(p lockservice.Plan, version string) string {
	return fmt.Sprintf("%s %s, %d server(s):", p.Kind.Title(), version, p.Nodes)
}

// Brief names the servers in a run's description.
func (s Settings) Brief(p lockservice.Plan) string {
	return fmt.Sprintf("service %s (%d servers)", p.Kind, p.Nodes)
}

// connectHosts are the servers an existing database's --connect names: PostgreSQL's
// URL's hosts, MariaDB's DSNs' addresses.
func connectHosts(p lockservice.Plan) ([]string, error) {
	if p.Kind == kind.MariaDB {
		e, err := parseMariaDBConnect(p.Connect)
		if err != nil {
			return nil, err
		}
		return e.hosts, nil
	}
	e, err := parsePostgresURL(p.Connect)
	if err != nil {
		return nil, err
	}
	return e.hosts, nil
}

// validateConnect checks an existing database's servers (--connect): one a
// --nodes, and no keepalive asked for (its owners chose it).
func (s Settings) validateConnect(p lockservice.Plan) error {
	hosts, err := connectHosts(p)
	title := p.Kind.Title()
	switch {
	case err != nil:
		return err
	case p.Nodes != len(hosts):
		return fmt.Errorf("nodes: --connect names %d %s servers, --nodes says %d", len(hosts), title, p.Nodes)
	case s.KeepAlive != 0:
		return fmt.Errorf("db-keepalive: an existing %s (connect) keeps the TCP keepalive its owners gave it; --db-keepalive is for the servers zlockcheck starts", title)
	case p.Processes:
		return fmt.Errorf("baseline-processes: there is no plain %s client loop as processes (--baseline runs it as goroutines)", title)
	}
	return nil
}

// checkSSHUser refuses SSH nodes reached as another user than root: a database server
// there runs as the node's own account for it (PostgreSQL's postgres, MariaDB's root).
func checkSSHUser(ssh lockservice.SSHConfig, title string) error {
	if ssh.Defaults().User != "root" {
		return fmt.Errorf("ssh-user: %s on SSH nodes needs --ssh-user root (the server runs as the node's own account for it)", title)
	}
	return nil
}
