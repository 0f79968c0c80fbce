package sqldb

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

func TestParsePostgresURL(t *testing.T) {
	const secret = "s3cret"
	for _, c := range []struct {
		url, want string // want: "" for accepted, else a piece of the error
		hosts     []string
	}{
		{url: "postgres://team@db1.example:5433,db2.example/locks?sslmode=require", hosts: []string{"db1.example:5433", "db2.example:5432"}},
		{url: "postgresql://team@10.0.0.5/locks", hosts: []string{"10.0.0.5:5432"}},
		{url: "postgres://team:" + secret + "@10.0.0.5/locks", want: "holds a password"},
		{url: "postgres://team@10.0.0.5/locks?password=" + secret, want: "password parameter"},
		{url: "postgres://10.0.0.5/locks", want: "names no role"},
		{url: "postgres://team@10.0.0.5/", want: "names no database"},
		{url: "postgres://team@127.0.0.1/locks", want: "loopback"},
		{url: "mysql://team@10.0.0.5/locks", want: "scheme"},
		{url: "host=10.0.0.5 user=team password=" + secret, want: "not a URL"},
		{url: "postgres://team@10.0.0.5:99999/locks", want: "bad port"},
		{url: "postgres://team:" + secret + "@10.0.0.5/lo%zzcks", want: "not a URL"},
	} {
		e, err := parsePostgresURL(c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.url, err)
		case c.want == "" && strings.Join(e.hosts, " ") != strings.Join(c.hosts, " "):
			t.Errorf("%s: hosts %v, want %v", c.url, e.hosts, c.hosts)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.url, err, c.want)
		case err != nil && strings.Contains(err.Error(), secret):
			t.Errorf("%s: the error repeats the password: %v", c.url, err)
		}
	}
}

func TestTheWorkersURLNamesTheRunsSchema(t *testing.T) {
	e, err := parsePostgresURL("postgres://team@db1:5433,db2/locks?sslmode=disable&options=-c%20statement_timeout%3D5s&target_session_attrs=read-write")
	if err != nil {
		t.Fatal(err)
	}
	u := e.withHosts([]string{"10.1.1.1:5433", "10.1.1.2:5432"}, "zlc_zlockcheck_run1")
	got := u.String()
	for _, want := range []string{"postgres://team@10.1.1.1:5433,10.1.1.2:5432/locks?", "options=-c%20statement_timeout%3D5s%20-c%20search_path%3Dzlc_zlockcheck_run1", "target_session_attrs=read-write"} {
		if !strings.Contains(got, want) {
			t.Errorf("workers' URL %s: want %q in it", got, want)
		}
	}
	cc, err := e.config(1, true, "zlc_x")
	if err != nil {
		t.Fatal(err)
	}
	if cc.Host != "db2" || cc.Port != 5432 || cc.User != "team" || cc.Database != "locks" {
		t.Errorf("the harness's config for server 2: %s:%d %s/%s", cc.Host, cc.Port, cc.User, cc.Database)
	}
	if cc.RuntimeParams["options"] != "-c statement_timeout=5s -c search_path=zlc_x" {
		t.Errorf("options %q: want the user's, then the run's schema", cc.RuntimeParams["options"])
	}
	if _, ok := cc.RuntimeParams["target_session_attrs"]; ok || cc.ValidateConnect != nil {
		t.Error("the harness's connection to one server keeps target_session_attrs: it could not read a standby")
	}
}

func TestSchemaFor(t *testing.T) {
	for root, want := range map[string]string{
		"/zlockcheck/20261128-2218-AB12": "zlc_zlockcheck_20261128_2218_ab12",
		"/x":                             "zlc_x",
		"/--":                            "zlc_root",
	} {
		if got := schemaFor(root); got != want {
			t.Errorf("schemaFor(%q) = %q, want %q", root, got, want)
		}
	}
	long := "/" + strings.Repeat("team-locks/", 10) + "run"
	if s := schemaFor(long); len(s) > 63 || !strings.HasPrefix(s, "zlc_") || !strings.HasSuffix(s, "_run") || s == schemaFor(long+"2") {
		t.Errorf("schemaFor(a long root) = %q: want at most 63 bytes, zlc_ first, the end kept, distinct", s)
	}
}

func TestPostgresConnectSettings(t *testing.T) {
	const url = "postgres://team@10.0.0.5,10.0.0.6/locks"
	for _, c := range []struct {
		name string
		s    Settings
		p    lockservice.Plan
		want string // "" for accepted
	}{
		{"counted", Settings{}, lockservice.Plan{Kind: kind.Postgres, Connect: url}, ""},
		{"nodes", Settings{}, lockservice.Plan{Kind: kind.Postgres, Connect: url, Nodes: 1}, "--nodes says 1"},
		{"keepalive", Settings{KeepAlive: time.Second}, lockservice.Plan{Kind: kind.Postgres, Connect: url}, "db-keepalive"},
		{"mariadb", Settings{}, lockservice.Plan{Kind: kind.MariaDB, Connect: "team@tcp(10.0.0.5:3306)/locks"}, ""},
		{"mariadb-password", Settings{}, lockservice.Plan{Kind: kind.MariaDB, Connect: "team:pw@tcp(10.0.0.5:3306)/locks"}, "MYSQL_PWD"},
	} {
		s, p := c.s.Defaults(c.p)
		err := s.Validate(p)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if c.name == "counted" && p.Nodes != 2 {
			t.Errorf("nodes %d from a URL of two hosts", p.Nodes)
		}
	}
}

func TestParseMariaDBConnect(t *testing.T) {
	const secret = "s3cret"
	for _, c := range []struct {
		dsn, want string // want: "" for accepted, else a piece of the error
		hosts     []string
	}{
		{dsn: "team@tcp(db1.example:3307)/locks,team@tcp(10.0.0.6)/locks", hosts: []string{"db1.example:3307", "10.0.0.6:3306"}},
		{dsn: "team:" + secret + "@tcp(10.0.0.5)/locks", want: "holds a password"},
		{dsn: "@tcp(10.0.0.5)/locks", want: "names no user"},
		{dsn: "team@unix(/run/mysqld.sock)/locks", want: "network"},
		{dsn: "team@tcp(127.0.0.1:3306)/locks", want: "loopback"},
		{dsn: "10.0.0.5:3306", want: "not a go-sql-driver DSN"},
	} {
		e, err := parseMariaDBConnect(c.dsn)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.dsn, err)
		case c.want == "" && strings.Join(e.hosts, " ") != strings.Join(c.hosts, " "):
			t.Errorf("%s: hosts %v, want %v", c.dsn, e.hosts, c.hosts)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.dsn, err, c.want)
		case err != nil && strings.Contains(err.Error(), secret):
			t.Errorf("%s: the error repeats the password: %v", c.dsn, err)
		}
	}
	e, err := parseMariaDBConnect("team@tcp(db1:3307)/locks?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Member: lockservice.Member{ID: 1, Port: 3307, Host: lockservice.NewExistingHost("db1:3307", netip.MustParseAddrPort("10.1.1.1:3307"))}}
	if got := e.workers([]*Server{s}, "zlc_run1"); !strings.HasPrefix(got, "team@tcp(10.1.1.1:3307)/zlc_run1?") || !strings.Contains(got, "timeout=5s") {
		t.Errorf("workers' DSN %q: want the resolved address, the run's database and the user's parameters", got)
	}
}
