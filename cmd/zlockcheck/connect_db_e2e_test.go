package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestConnectToAnExistingDatabase: a PostgreSQL and a MariaDB the test started outside
// the tool (on a node of the test's own, each with a user that logs in by password,
// on ports other than their defaults) are tested with --connect: the password comes
// from the client libraries' own variable and reaches no file and no message; a wrong
// one, one in the connect string and a server fault are clear errors; a lock under
// client faults aimed at the holder is valid, or on MariaDB invalid by an unfenced
// overlap only, never a recipe bug (connection-kill ends a backend or connection as
// the user itself, and at least once), and the run leaves no schema or database of its own, and nothing on the
// host. One node for both; the runs one after the other (the nodes' bridge and the
// run's uplink are host links the side-by-side runs' leftover checks would count).
func TestConnectToAnExistingDatabase(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.NFTables, testenv.PostgreSQL, testenv.MariaDB)
	nodes := testnodes.StartT(t, 1)
	const user, password = "zlcteam", "zlc-dbs3cret-41ad"
	ctx := context.Background()
	pg, err := nodes.StartPostgres(ctx, user, password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	maria, err := nodes.StartMariaDB(ctx, user, password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = maria.Stop() })
	fwd := forwardingOf(t, nodes.Bridge())
	for _, c := range []struct {
		service, connect, passwordVar, recipe string
		nemesis                               []string
		// honest: the run may be invalid, by an unfenced overlap only (a session
		// lock whose connection the server ended), never a recipe bug.
		honest bool
		// left lists what the run left on the server: its schemas or databases.
		left func(t *testing.T) []string
	}{
		{
			service: "postgres", connect: pg.URL, passwordVar: "PGPASSWORD", recipe: "pg-table-expiry",
			nemesis: []string{"--nemesis", "connection-kill,client-kill", "--nemesis-targets", "holder"},
			left: func(t *testing.T) (out []string) {
				err := pg.Admin(ctx, user, func(ctx context.Context, c *pgx.Conn) error {
					rows, err := c.Query(ctx, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'zlc\\_%' UNION ALL SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
					if err == nil {
						out, err = pgx.CollectRows(rows, pgx.RowTo[string])
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return out
			},
		},
		{
			// GET_LOCK goes with its connection: connection-kill at the holder is an
			// honest unfenced overlap, never a recipe bug.
			service: "mariadb", connect: maria.DSN, passwordVar: "MYSQL_PWD", recipe: "mariadb-getlock",
			nemesis: []string{"--nemesis", "connection-kill,client-pause", "--nemesis-targets", "holder"}, honest: true,
			left: func(t *testing.T) (out []string) {
				err := maria.Admin(ctx, func(ctx context.Context, c *sql.Conn) error {
					rows, err := c.QueryContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'zlc\\_%'")
					if err != nil {
						return err
					}
					defer rows.Close()
					for rows.Next() {
						var s string
						if err := rows.Scan(&s); err != nil {
							return err
						}
						out = append(out, s)
					}
					return rows.Err()
				})
				if err != nil {
					t.Fatal(err)
				}
				return out
			},
		},
	} {
		t.Run(c.service, func(t *testing.T) {
			base := []string{"run", "--service", c.service, "--recipe", c.recipe, "--time", "12s", "--seed", "2"}
			withPassword := strings.Replace(c.connect, user+"@", user+":"+password+"@", 1)
			for _, r := range []struct {
				env, want string
				args      []string
			}{
				{"wrong-password", "denied", []string{"--connect", c.connect}},
				{password, "holds a password", []string{"--connect", withPassword}},
				{password, "acts on the servers", []string{"--connect", c.connect, "--nemesis", "kill"}},
			} {
				store := t.TempDir()
				code, stdout, stderr := zlockcheckEnv(t, []string{c.passwordVar + "=" + r.env}, append(append(base, "--store", store), r.args...)...)
				want := r.want
				if want == "denied" && c.service == "postgres" {
					want = "password authentication failed"
				}
				if code != exitError || !strings.Contains(stderr, want) {
					t.Errorf("password %q, %v: exit %d, stderr %q; want exit %d and %q", r.env, r.args, code, stderr, exitError, want)
				}
				assertNoSecret(t, password, store, stdout+stderr)
			}
			store := keptIfFailed(t)
			code, stdout, stderr := zlockcheckEnv(t, []string{c.passwordVar + "=" + password},
				append(append(base, "--connect", c.connect, "--store", store, "--nemesis-interval", "3s"), c.nemesis...)...)
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			switch {
			case strings.Contains(stdout, "RECIPE BUG"):
				t.Fatal("a correct recipe judged a recipe bug")
			case c.honest && code == exitInvalid && !strings.Contains(stdout, "UNFENCED OVERLAP"):
				t.Fatalf("exit %d with no unfenced overlap to say why", code)
			case code != exitValid && !(c.honest && code == exitInvalid):
				t.Fatalf("exit %d, want %d (valid)", code, exitValid)
			}
			if !strings.Contains(stderr, `"killed":1`) && strings.Contains(strings.Join(c.nemesis, " "), "connection-kill") {
				t.Error("no connection-kill ended a connection: the user's own kill was never exercised")
			}
			if !strings.Contains(stdout, "(existing, not managed by zlockcheck)") {
				t.Error("the run does not say the server was an existing one")
			}
			assertFaultsApplied(t, stderr)
			assertNoSecret(t, password, store, stdout+stderr)
			if left := c.left(t); len(left) > 0 {
				t.Errorf("the run left its own on the server: %v", left)
			}
			assertHostLeftNothing(t, store, nodes.Bridge(), fwd)
		})
	}
}
