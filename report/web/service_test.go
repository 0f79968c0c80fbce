package web

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunPageNamesService: a Redis run's page (its results.json is the report
// package's fixture, as `zlockcheck run --service redis` wrote it) names Redis and its
// version in the facts table and ZooKeeper nowhere, and its coverage table shows
// the rows that only ZooKeeper's queue has as not applicable, with no count; an old
// results.json (zookeeper_version only) still shows ZooKeeper 3.8.0 (markZooKeeper,
// TestRunPageReasonFirst).
func TestRunPageNamesService(t *testing.T) {
	results, err := os.ReadFile(filepath.Join("..", "testdata", "redis-results.json"))
	must(t, err)
	store := t.TempDir()
	const run = "redislock-mutex/20261125T001505.827Z"
	must(t, os.MkdirAll(filepath.Join(store, run), 0o755))
	must(t, os.WriteFile(filepath.Join(store, run, "results.json"), results, 0o644))
	srv := server(t, store)
	_, body := get(t, srv, "/run/"+run+"/")
	assertOrder(t, run, body, markFacts, `<tr><th>Redis</th><td>7.0.15</td></tr>`, `id="coverage"`,
		`<tr class="coverage-row not-applicable" data-row="timed-out-while-queued">`, `<td class="num">-</td><td>not applicable: `)
	if strings.Contains(body, "ZooKeeper") {
		t.Errorf("a Redis run's page names ZooKeeper:\n%s", body)
	}
	if !strings.Contains(body, "situations not exercised, 2 not applicable") {
		t.Errorf("the coverage line does not count the rows not applicable:\n%s", body)
	}
}
