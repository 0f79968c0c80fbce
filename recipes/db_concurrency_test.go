package recipes

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestDBConcurrentWorkers: four workers of each correct database recipe contend for
// one lock, many cycles each, with no fault: no two hold at once, and (pg-table,
// pg-table-expiry) the fenced counter ends at the number of cycles.
func TestDBConcurrentWorkers(t *testing.T) {
	pg := startTestPostgres(t)
	maria := startTestMariaDB(t)
	const workers, cycles = 4, 25
	for _, c := range []struct {
		name    string
		w       *dbWorld
		build   func(t *testing.T, w *dbWorld, cfg Config) Recipe
		counter bool
	}{
		{"pg-table", pg, func(t *testing.T, w *dbWorld, cfg Config) Recipe { return buildDB(t, w, cfg, pgTableCorrect) }, true},
		{"pg-table-expiry", pg, func(t *testing.T, w *dbWorld, cfg Config) Recipe { return buildDB(t, w, cfg, pgTableExpiry) }, true},
		{"pg-advisory", pg, func(t *testing.T, w *dbWorld, cfg Config) Recipe {
			r, err := newPgAdvisory(context.Background(), cfg, sessCorrect, (&testDialer{host: w.worker}).dial)
			return mustBuild(t, r, err)
		}, false},
		{"mariadb-getlock", maria, func(t *testing.T, w *dbWorld, cfg Config) Recipe {
			r, err := newMariaDBGetLock(context.Background(), cfg, sessCorrect, (&testDialer{host: w.worker}).dial)
			return mustBuild(t, r, err)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var inside, overlaps atomic.Int32
			var wg sync.WaitGroup
			counter := "/zlc-test/counter-concurrent-" + c.name
			for i := range workers {
				cfg, _ := testDBConfig(t, c.w.servers(), workloads.Mutex, 3*time.Second, i+1)
				if c.counter {
					cfg.Kind, cfg.CounterPath, cfg.Fenced = workloads.Counter, counter, true
				}
				r := c.build(t, c.w, cfg)
				wg.Go(func() {
					for range cycles {
						if _, err := r.Acquire(context.Background(), AcquireRequest{Timeout: 10 * time.Second}); err != nil {
							t.Errorf("acquire: %v", err)
							return
						}
						if inside.Add(1) > 1 {
							overlaps.Add(1)
						}
						if cr, ok := r.(Counter); ok {
							v, err := cr.Read(context.Background())
							if err == nil {
								err = cr.Write(context.Background(), v+1)
							}
							if err != nil {
								t.Errorf("counter: %v", err)
							}
						}
						inside.Add(-1)
						if err := r.Release(context.Background()); err != nil {
							t.Errorf("release: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			if overlaps.Load() > 0 {
				t.Fatalf("%d overlapping holds", overlaps.Load())
			}
			if !c.counter {
				return
			}
			rows := pgAdmin(t, c.w, "SELECT value FROM zlc_counters WHERE name = $1", counter)
			defer rows.Close()
			var v int64
			if !rows.Next() || rows.Scan(&v) != nil || v != workers*cycles {
				t.Fatalf("counter %d, want %d", v, workers*cycles)
			}
		})
	}
}

func buildDB(t *testing.T, w *dbWorld, cfg Config, m pgTableMutant) Recipe {
	r, err := newPgTable(context.Background(), cfg, m, (&testDialer{host: w.worker}).dial)
	return mustBuild(t, r, err)
}

// mustBuild fails t on a constructor's error and closes the recipe when t ends.
func mustBuild[R Recipe](t *testing.T, r R, err error) Recipe {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
