package sqldb

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestLocalEndsATableLease: on each database's private server (conformance's), End
// of a hold whose acquire named a lock table of the worker's own deletes that row by
// its key (a column of the table's primary key, here not the first one, or of a
// unique index), and only it; a row that is not there is an error, and a lock table
// with no key names nothing to delete. No report is owed (a lease).
func TestLocalEndsATableLease(t *testing.T) {
	testenv.RequireIntegration(t, testenv.PostgreSQL, testenv.MariaDB)
	cases := []struct {
		kind  kind.Name
		setup []string
	}{
		{kind.Postgres, []string{
			`CREATE TABLE app_locks (region text, lock_key text, owner text, PRIMARY KEY (region, lock_key))`,
			`INSERT INTO app_locks VALUES ('eu', 'jobs/zlc-k', 'a'), ('eu', 'other', 'b')`,
			`CREATE TABLE no_key (lock_key text)`,
		}},
		{kind.MariaDB, []string{
			`CREATE TABLE app_locks (region VARCHAR(20), lock_key VARCHAR(100), owner VARCHAR(20), PRIMARY KEY (region, lock_key))`,
			`INSERT INTO app_locks VALUES ('eu', 'jobs/zlc-k', 'a'), ('eu', 'other', 'b')`,
			`CREATE TABLE no_key (lock_key VARCHAR(100))`,
		}},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			loc, err := lockservice.StartLocal(ctx, c.kind, lockservice.LocalConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer loc.Close()
			exec := execOn(t, loc.Connect())
			for _, q := range c.setup {
				exec(q)
			}
			hold := func(table, row string) lockservice.Holder {
				return lockservice.Holder{Place: workloads.LockPlace{Table: table, Row: row}}
			}
			ending, err := loc.End(ctx, hold("app_locks", "jobs/zlc-k"))
			if err != nil || ending.MustReport || !strings.Contains(ending.Did, `deleted row "jobs/zlc-k" of app_locks`) {
				t.Fatalf("End: %+v, %v", ending, err)
			}
			if n := exec("SELECT lock_key FROM app_locks"); n != 1 {
				t.Errorf("%d rows left, want the other lock's alone", n)
			}
			if _, err := loc.End(ctx, hold("app_locks", "jobs/zlc-k")); err == nil || !strings.Contains(err.Error(), `has no row whose key is "jobs/zlc-k"`) {
				t.Errorf("End of a row no longer there: %v", err)
			}
			if _, err := loc.End(ctx, hold("no_key", "jobs/zlc-k")); err == nil {
				t.Error("End on a table with no key: no error")
			}
		})
	}
}

// execOn runs statements as the lock's user on the database connect names (a
// PostgreSQL URL or a MariaDB DSN) and returns how many rows a query gave.
func execOn(t *testing.T, connect string) func(q string) int {
	ctx := context.Background()
	// rows counts what query gave, failing on its error or the rows'.
	rows := func(q string, query func() (next func() bool, end func() error, err error)) int {
		next, end, err := query()
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		n := 0
		for next() {
			n++
		}
		if err := end(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if strings.HasPrefix(connect, "postgres://") {
		c, err := pgx.Connect(ctx, connect)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return func(q string) int {
			return rows(q, func() (func() bool, func() error, error) {
				r, err := c.Query(ctx, q)
				if err != nil {
					return nil, nil, err
				}
				return r.Next, func() error { r.Close(); return r.Err() }, nil
			})
		}
	}
	cfg, err := mysql.ParseDSN(connect)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return func(q string) int {
		return rows(q, func() (func() bool, func() error, error) {
			r, err := db.QueryContext(ctx, q)
			if err != nil {
				return nil, nil, err
			}
			return r.Next, func() error { r.Close(); return r.Err() }, nil
		})
	}
}
