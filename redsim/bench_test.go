package redsim

import (
	"flag"
	"strconv"
	"testing"
)

// BenchmarkLockProperty runs the lock property of TestRealRecipes on each real
// recipe, b.N schedules of rapid's drawing (about 90 steps, then the liveness
// phase and the checks), one at a time (crypto/rand is seeded per run, process
// wide), and reports schedules/s.
//
//	go test ./redsim/ -run '^$' -bench LockProperty -benchtime 200x
//
// A simulation needs a synctest bubble, which only a *testing.T can open:
// testing.RunTests gives the benchmark one (it prints nothing unless -test.v).
func BenchmarkLockProperty(b *testing.B) {
	for _, r := range realRecipes {
		b.Run(r.name, func(b *testing.B) {
			rec, err := CatalogRecipe(r.name)
			if err != nil {
				b.Fatal(err)
			}
			f := flag.Lookup("rapid.checks")
			was := f.Value.String()
			if err := f.Value.Set(strconv.Itoa(b.N)); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = f.Value.Set(was) }()
			runs := 0
			ok := testing.RunTests(func(string, string) (bool, error) { return true, nil }, []testing.InternalTest{{
				Name: b.Name(),
				F: func(t *testing.T) {
					CheckLock(t, LockConfig{Recipe: rec, Instances: r.instances}, func(RunInfo) { runs++ })
				},
			}})
			if !ok {
				b.Fatalf("%s failed a schedule (go test -run TestRealRecipes/%s shows it)", r.name, r.name)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "schedules/s")
			if runs < b.N {
				b.Fatalf("%d runs, want %d", runs, b.N)
			}
		})
	}
}
