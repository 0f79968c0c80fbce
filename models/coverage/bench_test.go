package coverage

import (
	"math/rand/v2"
	"testing"

	"github.com/zlockcheck/zlockcheck/histories"
)

// BenchmarkCompute100k: a 100k-line mutex history of 50 processes queueing on one
// lock (every fifth acquire timing out), with a client fault a second.
func BenchmarkCompute100k(b *testing.B) {
	var hb hb
	rng := rand.New(rand.NewPCG(1, 2))
	var holderFree int64 // when the lock is next free, in ms
	for i := 0; len(hb.h) < 100_000; i++ {
		p := i % 50
		from := holderFree - int64(rng.IntN(50))
		if rng.IntN(5) == 0 {
			hb.call(p, "acquire", from, histories.Fail, from+20)
			continue
		}
		ok := holderFree + 1
		hb.call(p, "acquire", from, histories.OK, ok)
		hb.call(p, "release", ok+5, histories.OK, ok+6)
		holderFree = ok + 6
		if i%200 == 0 {
			hb.clientFault("client-pause", rng.IntN(50), ok+2)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		Compute(hb.h, Options{})
	}
}
