package zksim

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// BenchmarkSchedules runs random schedules of the lock property on zlc-mutex, each
// drawn as the rapid property draws one (about 90 steps, then the liveness phase and
// the final checks, models included), in GOMAXPROCS bubbles at once (-cpu=1 for
// one), and reports schedules/s.
//
// A simulation needs a synctest bubble, which only a *testing.T can open:
// testing.RunTests gives the benchmark some (it prints nothing unless -test.v).
func BenchmarkSchedules(b *testing.B) { benchSchedules(b, ZLCMutex(zlcmutex.MutantNone)) }

// BenchmarkSchedulesWire is BenchmarkSchedules in the wire mode: the same zlc-mutex on
// zlcmutex.ZKClient over go-zookeeper, talking ZooKeeper's protocol to the simulator.
func BenchmarkSchedulesWire(b *testing.B) { benchSchedules(b, ZLCMutexWire(zlcmutex.MutantNone)) }

func benchSchedules(b *testing.B, recipe Recipe) {
	n := int64(b.N)
	var next atomic.Int64
	var failure atomic.Pointer[Failure]
	workers := runtime.GOMAXPROCS(0)
	ok := testing.RunTests(func(string, string) (bool, error) { return true, nil }, []testing.InternalTest{{
		Name: b.Name(),
		F: func(t *testing.T) {
			for w := range workers {
				t.Run(strconv.Itoa(w), func(t *testing.T) {
					t.Parallel()
					synctest.Test(t, func(t *testing.T) {
						for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
							rng := rand.New(rand.NewPCG(uint64(i), 0))
							if _, f := randomRun(rng, LockConfig{Recipe: recipe}, 90); f != nil {
								failure.CompareAndSwap(nil, f)
							}
						}
					})
				})
			}
		},
	}})
	if f := failure.Load(); !ok || f != nil {
		b.Fatalf("zlc-mutex failed a schedule: %v", f)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "schedules/s")
}
