package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestConnectToAnExistingPostgres: a PostgreSQL the test started outside the tool (in
// a namespace the test made, a role that logs in by password, on a port other than
// 5432) is tested with --connect: the password comes from PGPASSWORD and reaches no
// file and no message; a wrong one, one in the URL and a server fault are clear
// errors; pg-table-expiry under client faults aimed at the holder (connection-kill
// ends its backend as the user's own role) is valid, and the run leaves no schema, no
// backend of its own on the server, and nothing on the host.
func TestConnectToAnExistingPostgres(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.NFTables, testenv.PostgreSQL)
	// Not side by side: its test nodes' bridge and the run's uplink are links in the
	// host's namespace, which the other runs' leftover checks would count.
	nodes := testnodes.StartT(t, 1)
	const role, password = "zlcteam", "zlc-pgs3cret-41ad"
	pg, err := nodes.StartPostgres(context.Background(), role, password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	fwd := forwardingOf(t, nodes.Bridge())
	base := []string{"run", "--service", "postgres", "--recipe", "pg-table-expiry", "--time", "12s", "--seed", "2"}

	t.Run("refusals", func(t *testing.T) {
		withPassword := strings.Replace(pg.URL, role+"@", role+":"+password+"@", 1)
		for _, c := range []struct {
			env, want string
			args      []string
		}{
			{"wrong-password", "password authentication failed", []string{"--connect", pg.URL}},
			{password, "holds a password", []string{"--connect", withPassword}},
			{password, "acts on the servers", []string{"--connect", pg.URL, "--nemesis", "kill"}},
		} {
			store := t.TempDir()
			code, stdout, stderr := zlockcheckEnv(t, []string{"PGPASSWORD=" + c.env}, append(append(base, "--store", store), c.args...)...)
			if code != exitError || !strings.Contains(stderr, c.want) {
				t.Errorf("password %q, %v: exit %d, stderr %q; want exit %d and %q", c.env, c.args, code, stderr, exitError, c.want)
			}
			assertNoSecret(t, password, store, stdout+stderr)
		}
	})
	t.Run("pg-table-expiry/valid", func(t *testing.T) {
		store := keptIfFailed(t)
		code, stdout, stderr := zlockcheckEnv(t, []string{"PGPASSWORD=" + password}, append(base, "--connect", pg.URL, "--store", store,
			"--nemesis", "connection-kill,client-kill", "--nemesis-targets", "holder", "--nemesis-interval", "3s")...)
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
		if code != exitValid {
			t.Fatalf("exit %d, want %d (valid)", code, exitValid)
		}
		if !strings.Contains(stdout, "(existing, not managed by zlockcheck)") {
			t.Error("the run does not say the PostgreSQL was an existing one")
		}
		assertFaultsApplied(t, stderr)
		assertNoSecret(t, password, store, stdout+stderr)
		err := pg.Admin(context.Background(), role, func(ctx context.Context, c *pgx.Conn) error {
			var schemas []string
			rows, err := c.Query(ctx, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'zlc%'")
			if err != nil {
				return err
			}
			if schemas, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			if len(schemas) > 0 {
				t.Errorf("the run left its schema on the PostgreSQL: %v", schemas)
			}
			var tables int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
				return err
			}
			if tables > 0 {
				t.Errorf("the run made %d tables outside its schema", tables)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		assertHostLeftNothing(t, store, nodes.Bridge(), fwd)
	})
}
