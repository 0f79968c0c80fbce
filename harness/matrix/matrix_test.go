package matrix

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// testBase is a matrix's base as the CLI makes it with --seed 7 and no other flag: a
// catalogue recipe's worker served by a zlockcheck binary.
func testBase() harness.Config {
	return harness.Config{Seed: 7, Worker: harness.WorkerSetup{Self: "/bin/zlockcheck"}}
}

// planTestMatrix plans the matrix of recipes × faults ("": the defaults) on base and
// returns its rows, columns and cells by "recipe/fault".
func planTestMatrix(t *testing.T, base harness.Config, recipes []string, faults []nemesis.Setup) ([]Row, []nemesis.Setup, map[string]Run) {
	t.Helper()
	if faults == nil {
		faults = DefaultSetups(recipes)
	}
	p, err := New(context.Background(), base, recipes, faults)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != len(p.Rows)*len(faults) {
		t.Fatalf("%d cells for %d rows × %d setups", len(p.Runs), len(p.Rows), len(faults))
	}
	cells := map[string]Run{}
	for _, r := range p.Runs {
		cells[r.Cell.Recipe+"/"+r.Cell.Fault] = r
	}
	return p.Rows, faults, cells
}

// setupsNamed are the setups of AllSetups with these names.
func setupsNamed(t *testing.T, names ...string) []nemesis.Setup {
	t.Helper()
	var out []nemesis.Setup
	for _, n := range names {
		i := slices.IndexFunc(AllSetups(), func(s nemesis.Setup) bool { return s.Name == n })
		if i < 0 {
			t.Fatalf("no setup %s", n)
		}
		out = append(out, AllSetups()[i])
	}
	return out
}

// TestMatrixZooKeeperDefaultUnchanged: with no recipe of another service, the matrix's
// rows are ZooKeeper's real recipes and its columns exactly today's setups, each cell
// a ZooKeeper run with the setup's faults and the seed given.
func TestMatrixZooKeeperDefaultUnchanged(t *testing.T) {
	names := RecipesOf(kind.Default)
	for _, n := range names {
		if k := harness.RecipeService(n); k != kind.ZooKeeper {
			t.Errorf("default row %s is not a ZooKeeper recipe", n)
		}
	}
	setups := DefaultSetups(names)
	const today = "none, server, client-partition, session-expire, client-pause, isolate-follower-quorum"
	if got := SetupNames(setups); got != today {
		t.Errorf("default columns %q, want %q", got, today)
	}
	rows, _, cells := planTestMatrix(t, testBase(), []string{"gozk", "zlc-mutex"}, nil)
	for _, r := range rows {
		if r.Service != kind.ZooKeeper || r.Nodes != 3 || r.Topology != "" || r.Label() != r.Recipe {
			t.Errorf("row %+v: want a ZooKeeper row of 3 labelled by its recipe", r)
		}
	}
	for key, p := range cells {
		if p.Cell.Verdict == NA || p.Config.Seed != 7 || p.Config.Name != "matrix-"+strings.Replace(key, "/", "-", 1) {
			t.Errorf("%s: %+v (seed %d, name %s): want a run named as before, seed 7", key, p.Cell, p.Config.Seed, p.Config.Name)
		}
	}
	if got := cells["gozk/server"].Config.Nemesis; fmt.Sprint(got) != "[kill pause partition]" {
		t.Errorf("gozk/server's faults %v", got)
	}
}

// TestMatrixAcrossServices: a mixed matrix gives each Redis row the topology its
// recipe needs, runs failover on replicas for the single-instance recipes, and makes
// n/a the cells whose faults the row's service or topology refuses.
func TestMatrixAcrossServices(t *testing.T) {
	rows, setups, cells := planTestMatrix(t, testBase(), []string{"redis-lock", "redsync", "gozk"}, nil)
	if len(setups) != len(nemesis.Setups())+len(nemesis.NamedSetups()) {
		t.Errorf("columns %s: want the Redis setups too when a row is Redis's", SetupNames(setups))
	}
	wantRows := []string{"redis-lock (redis single ×1)", "redsync (redis redlock ×3)", "gozk"}
	for i, r := range rows {
		if r.Label() != wantRows[i] {
			t.Errorf("row %d: %q, want %q", i, r.Label(), wantRows[i])
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
	rows, setups, cells := planTestMatrix(t, testBase(), []string{"pg-table", "mariadb-getlock", "gozk"}, nil)
	if len(setups) != len(nemesis.Setups())+len(nemesis.NamedSetups()) {
		t.Errorf("columns %s: want the further setups when a row is a database's", SetupNames(setups))
	}
	wantRows := []string{"pg-table (postgres ×2)", "mariadb-getlock (mariadb ×1)", "gozk"}
	for i, r := range rows {
		if r.Label() != wantRows[i] {
			t.Errorf("row %d: %q, want %q", i, r.Label(), wantRows[i])
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
func checkPlannedCell(t *testing.T, key string, p Run, want string) {
	t.Helper()
	if want == "n/a" {
		if p.Cell.Verdict != NA || p.Cell.NotApplicable == "" {
			t.Errorf("%s: %+v, want n/a with a reason", key, p.Cell)
		}
		return
	}
	got := fmt.Sprintf("%s ×%d", p.Config.Deployment(), p.Config.Nodes)
	if p.Cell.Verdict == NA || got != want || p.Cell.Topology != p.Config.Deployment() {
		t.Errorf("%s: %+v on %q, want a run on %q", key, p.Cell, got, want)
	}
}

// TestMatrixPinnedTopology: a base that names the topology (--redis-topology) pins every Redis row and cell, so
// failover on one instance is n/a; a ZooKeeper row of the same matrix is untouched.
func TestMatrixPinnedTopology(t *testing.T) {
	base := testBase()
	base.Settings = redis.RedisSettings{Topology: redis.RedisSingle, Persistence: redis.PersistAOFAlways}
	rows, _, cells := planTestMatrix(t, base, []string{"redis-lock", "gozk"}, setupsNamed(t, "failover", "restart"))
	if rows[0].Label() != "redis-lock (redis single ×1)" || rows[1].Label() != "gozk" {
		t.Errorf("rows %+v", rows)
	}
	checkPlannedCell(t, "redis-lock/failover", cells["redis-lock/failover"], "n/a")
	if c := cells["redis-lock/restart"].Config; c.Settings.(redis.RedisSettings).Persistence != redis.PersistAOFAlways {
		t.Errorf("redis-lock/restart: settings %+v, want aof-always", c.Settings)
	}
	checkPlannedCell(t, "gozk/restart", cells["gozk/restart"], " ×3")
}

// TestMatrixNACellsNotCounted: n/a cells are written as "n/a" (matrix.json says why)
// and do not count in the worst verdict; a cell on another topology than its row's
// and a violation's cause class show in matrix.md.
func TestMatrixNACellsNotCounted(t *testing.T) {
	dir := t.TempDir()
	rows := []Row{{Recipe: "redis-lock", Service: kind.Redis, Topology: "single", Nodes: 1}}
	setups := []nemesis.Setup{{Name: "session-expire"}}
	plan := Plan{Rows: rows, Setups: setups, Runs: []Run{{Cell: Cell{Recipe: "redis-lock", Fault: "session-expire", Verdict: NA, NotApplicable: "nemesis session-expire: not built for Redis yet"}}}}
	worst, err := plan.Run(context.Background(), dir, io.Discard)
	if err != nil || worst != models.Valid {
		t.Fatalf("worst %s (%v), want valid: an n/a cell counts for nothing", worst, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "matrix.json"))
	if err != nil || !strings.Contains(string(data), `"verdict": "n/a"`) || !strings.Contains(string(data), "not built for Redis") {
		t.Errorf("matrix.json lacks the n/a cell and its reason (%v):\n%s", err, data)
	}
	at := 3.0
	cells := []Cell{
		plan.Runs[0].Cell,
		{Recipe: "redis-lock", Fault: "failover", Verdict: models.Invalid, Cause: "server lost the lock", FirstViolationSeconds: &at, Ops: 90, Topology: "replicas", Nodes: 3},
	}
	plan.Setups = append(setups, nemesis.Setup{Name: "failover"})
	md := plan.Table(cells)
	for _, w := range []string{"| redis-lock (redis single ×1) | n/a | invalid (3s, server lost the lock), 90 ops, on replicas ×3 |", "n/a: the setup's faults cannot run"} {
		if !strings.Contains(md, w) {
			t.Errorf("matrix.md lacks %q:\n%s", w, md)
		}
	}
}

// TestMatrixServiceRedis: a base on Redis (--service redis) makes every real Redis recipe a row, each on
// Redis, with the Redis setups among the columns; a recipe that runs on a cluster
// only (redsync-one-cluster) has its row there.
func TestMatrixServiceRedis(t *testing.T) {
	base := testBase()
	base.Service = kind.Redis
	rows, setups, _ := planTestMatrix(t, base, RecipesOf(kind.Redis), nil)
	if len(rows) == 0 || len(setups) != len(nemesis.Setups())+len(nemesis.NamedSetups()) {
		t.Fatalf("%d rows, columns %s", len(rows), SetupNames(setups))
	}
	cluster := false
	for _, r := range rows {
		if r.Service != kind.Redis || strings.HasPrefix(r.Recipe, "mutant") {
			t.Errorf("row %+v: want a real Redis recipe on Redis", r)
		}
		if r.Recipe == "redsync-one-cluster" {
			cluster = r.Topology == "cluster" && r.Nodes == 6
		}
	}
	if !cluster {
		t.Errorf("rows %+v: want redsync-one-cluster on the cluster of 6", rows)
	}
}

// TestMatrixHerdColumn: matrix.md's herd column shows each recipe's herd verdict and
// reads per grant from its run without faults, whatever its other runs said.
func TestMatrixHerdColumn(t *testing.T) {
	dir := t.TempDir()
	classes := nemesis.Setups()[:2] // none, server
	cells := []Cell{
		{Recipe: "zlc-mutex", Fault: "server", Verdict: models.Valid, Herd: &herd.Report{Verdict: herd.NotExercised}},
		{Recipe: "zlc-mutex", Fault: "none", Verdict: models.Valid, Herd: &herd.Report{Verdict: herd.NoHerd, ReadsPerGrant: 4.46}},
		{Recipe: "mutant-herd", Fault: "none", Verdict: models.Valid, Herd: &herd.Report{Verdict: herd.Herd, ReadsPerGrant: 15.5}},
		{Recipe: "gozk", Fault: "none", Verdict: models.Valid},
	}
	p := Plan{Rows: []Row{{Recipe: "zlc-mutex"}, {Recipe: "mutant-herd"}, {Recipe: "gozk"}}, Setups: classes}
	if err := p.Write(dir, cells); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "matrix.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	for _, want := range []string{"| recipe | none | server | herd |", "| no herd, 4.5 reads/grant |\n", "| herd, 15.5 reads/grant |\n", "| gozk | valid, 0 ops |  |  |\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("matrix.md lacks %q:\n%s", want, md)
		}
	}
}
