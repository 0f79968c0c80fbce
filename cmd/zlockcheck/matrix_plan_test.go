package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// planTestMatrix plans the matrix of recipes × faults with the run flags args, as
// matrixCmd does, and returns its rows and cells by "recipe/fault".
func planTestMatrix(t *testing.T, recipes, faults string, args ...string) ([]matrixRow, []nemesis.Setup, map[string]matrixRun) {
	t.Helper()
	fs, o := runFlags()
	if err := fs.Parse(append([]string{"--seed", "7"}, args...)); err != nil {
		t.Fatal(err)
	}
	o.noteSet(fs)
	names, err := matrixRecipes(*o, recipes)
	if err != nil {
		t.Fatal(err)
	}
	setups, err := pickSetups(faults, names)
	if err != nil {
		t.Fatal(err)
	}
	rows, plan, err := planMatrix(context.Background(), *o, names, setups, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != len(rows)*len(setups) {
		t.Fatalf("%d cells for %d rows × %d setups", len(plan), len(rows), len(setups))
	}
	cells := map[string]matrixRun{}
	for _, p := range plan {
		cells[p.cell.Recipe+"/"+p.cell.Fault] = p
	}
	return rows, setups, cells
}

// TestMatrixZooKeeperDefaultUnchanged: with no recipe of another service, the matrix's
// rows are ZooKeeper's real recipes and its columns exactly today's setups, each cell
// a ZooKeeper run with the setup's faults and the seed given.
func TestMatrixZooKeeperDefaultUnchanged(t *testing.T) {
	names, err := matrixRecipes(runOptions{}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if k := serviceRecipes([]string{n}, kind.ZooKeeper); len(k) != 1 {
			t.Errorf("default row %s is not a ZooKeeper recipe", n)
		}
	}
	setups, err := pickSetups("", names)
	if err != nil {
		t.Fatal(err)
	}
	const today = "none, server, client-partition, session-expire, client-pause, isolate-follower-quorum"
	if got := setupNames(setups); got != today {
		t.Errorf("default columns %q, want %q", got, today)
	}
	rows, _, cells := planTestMatrix(t, "gozk,zlc-mutex", "")
	for _, r := range rows {
		if r.Service != kind.ZooKeeper || r.Nodes != 3 || r.Topology != "" || r.label() != r.Recipe {
			t.Errorf("row %+v: want a ZooKeeper row of 3 labelled by its recipe", r)
		}
	}
	for key, p := range cells {
		if p.cell.Verdict == verdictNA || p.cfg.Seed != 7 || p.cfg.Name != "matrix-"+strings.Replace(key, "/", "-", 1) {
			t.Errorf("%s: %+v (seed %d, name %s): want a run named as before, seed 7", key, p.cell, p.cfg.Seed, p.cfg.Name)
		}
	}
	if got := cells["gozk/server"].cfg.Nemesis; fmt.Sprint(got) != "[kill pause partition]" {
		t.Errorf("gozk/server's faults %v", got)
	}
}

// TestMatrixAcrossServices: a mixed matrix gives each Redis row the topology its
// recipe needs, runs failover on replicas for the single-instance recipes, and makes
// n/a the cells whose faults the row's service or topology refuses.
func TestMatrixAcrossServices(t *testing.T) {
	rows, setups, cells := planTestMatrix(t, "redis-lock,redsync,gozk", "")
	if len(setups) != len(nemesis.Setups())+len(nemesis.NamedSetups()) {
		t.Errorf("columns %s: want the Redis setups too when a row is Redis's", setupNames(setups))
	}
	wantRows := []string{"redis-lock (redis single ×1)", "redsync (redis redlock ×3)", "gozk"}
	for i, r := range rows {
		if r.label() != wantRows[i] {
			t.Errorf("row %d: %q, want %q", i, r.label(), wantRows[i])
		}
	}
	want := map[string]string{ // cell: "n/a", or the topology ×nodes it runs on
		"redis-lock/none": "single ×1", "redis-lock/restart": "single ×1", "redis-lock/clock-jump": "single ×1",
		"redis-lock/failover": "replicas ×3", "redis-lock/session-expire": "n/a", "redis-lock/connection-kill": "single ×1",
		"redsync/failover": "n/a", "redsync/clock-jump": "redlock ×3", "redsync/restart": "redlock ×3", "redsync/session-expire": "n/a",
		"gozk/restart": " ×3", "gozk/failover": "n/a", "gozk/clock-jump": "n/a", "gozk/connection-kill": "n/a", "gozk/session-expire": " ×3",
	}
	for key, w := range want {
		checkPlannedCell(t, key, cells[key], w)
	}
}

// TestMatrixWithDatabases: database rows bring the further columns; a PostgreSQL row
// runs on a primary and a standby (so failover runs), a MariaDB row on one server,
// and what their service cannot have is n/a.
func TestMatrixWithDatabases(t *testing.T) {
	rows, setups, cells := planTestMatrix(t, "pg-table,mariadb-getlock,gozk", "")
	if len(setups) != len(nemesis.Setups())+len(nemesis.NamedSetups()) {
		t.Errorf("columns %s: want the further setups when a row is a database's", setupNames(setups))
	}
	wantRows := []string{"pg-table (postgres ×2)", "mariadb-getlock (mariadb ×1)", "gozk"}
	for i, r := range rows {
		if r.label() != wantRows[i] {
			t.Errorf("row %d: %q, want %q", i, r.label(), wantRows[i])
		}
	}
	want := map[string]string{
		"pg-table/none": " ×2", "pg-table/failover": " ×2", "pg-table/connection-kill": " ×2", "pg-table/restart": " ×2",
		"pg-table/session-expire": "n/a", "pg-table/clock-jump": "n/a",
		"mariadb-getlock/failover": "n/a", "mariadb-getlock/connection-kill": " ×1", "mariadb-getlock/client-pause": " ×1",
		"gozk/connection-kill": "n/a",
	}
	for key, w := range want {
		checkPlannedCell(t, key, cells[key], w)
	}
}

// checkPlannedCell checks a planned cell against want: "n/a" with a reason, or the
// topology ×nodes its run uses.
func checkPlannedCell(t *testing.T, key string, p matrixRun, want string) {
	t.Helper()
	if want == "n/a" {
		if p.cell.Verdict != verdictNA || p.cell.NotApplicable == "" {
			t.Errorf("%s: %+v, want n/a with a reason", key, p.cell)
		}
		return
	}
	got := fmt.Sprintf("%s ×%d", p.cfg.Redis.Topology, p.cfg.Nodes)
	if p.cell.Verdict == verdictNA || got != want || p.cell.Topology != string(p.cfg.Redis.Topology) {
		t.Errorf("%s: %+v on %q, want a run on %q", key, p.cell, got, want)
	}
}

// TestMatrixPinnedTopology: --redis-topology pins every Redis row and cell, so
// failover on one instance is n/a; a ZooKeeper row of the same matrix is untouched.
func TestMatrixPinnedTopology(t *testing.T) {
	rows, _, cells := planTestMatrix(t, "redis-lock,gozk", "failover,restart", "--redis-topology", "single", "--redis-persistence", "aof-always")
	if rows[0].label() != "redis-lock (redis single ×1)" || rows[1].label() != "gozk" {
		t.Errorf("rows %+v", rows)
	}
	checkPlannedCell(t, "redis-lock/failover", cells["redis-lock/failover"], "n/a")
	if c := cells["redis-lock/restart"].cfg; c.Redis.Persistence != redis.PersistAOFAlways {
		t.Errorf("redis-lock/restart: persistence %q, want aof-always", c.Redis.Persistence)
	}
	checkPlannedCell(t, "gozk/restart", cells["gozk/restart"], " ×3")
}

// TestMatrixNACellsNotCounted: n/a cells are written as "n/a" (matrix.json says why)
// and do not count in the worst verdict; a cell on another topology than its row's
// and a violation's cause class show in matrix.md.
func TestMatrixNACellsNotCounted(t *testing.T) {
	dir := t.TempDir()
	rows := []matrixRow{{Recipe: "redis-lock", Service: kind.Redis, Topology: "single", Nodes: 1}}
	setups := []nemesis.Setup{{Name: "session-expire"}}
	plan := []matrixRun{{cell: matrixCell{Recipe: "redis-lock", Fault: "session-expire", Verdict: verdictNA, NotApplicable: "nemesis session-expire: not built for Redis yet"}}}
	worst, err := runMatrix(context.Background(), dir, rows, setups, plan, runOptions{}, io.Discard)
	if err != nil || worst != models.Valid {
		t.Fatalf("worst %s (%v), want valid: an n/a cell counts for nothing", worst, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "matrix.json"))
	if err != nil || !strings.Contains(string(data), `"verdict": "n/a"`) || !strings.Contains(string(data), "not built for Redis") {
		t.Errorf("matrix.json lacks the n/a cell and its reason (%v):\n%s", err, data)
	}
	at := 3.0
	cells := []matrixCell{
		plan[0].cell,
		{Recipe: "redis-lock", Fault: "failover", Verdict: models.Invalid, Cause: "server lost the lock", FirstViolationSeconds: &at, Ops: 90, Topology: "replicas", Nodes: 3},
	}
	md := matrixTable(rows, append(setups, nemesis.Setup{Name: "failover"}), cells, runOptions{})
	for _, w := range []string{"| redis-lock (redis single ×1) | n/a | invalid (3s, server lost the lock), 90 ops, on replicas ×3 |", "n/a: the setup's faults cannot run"} {
		if !strings.Contains(md, w) {
			t.Errorf("matrix.md lacks %q:\n%s", w, md)
		}
	}
}

// TestMatrixServiceRedis: --service redis makes every real Redis recipe a row, each on
// Redis, with the Redis setups among the columns.
func TestMatrixServiceRedis(t *testing.T) {
	rows, setups, _ := planTestMatrix(t, "", "", "--service", "redis")
	if len(rows) == 0 || len(setups) != len(nemesis.Setups())+len(nemesis.NamedSetups()) {
		t.Fatalf("%d rows, columns %s", len(rows), setupNames(setups))
	}
	for _, r := range rows {
		if r.Service != kind.Redis || strings.HasPrefix(r.Recipe, "mutant") {
			t.Errorf("row %+v: want a real Redis recipe on Redis", r)
		}
	}
}
