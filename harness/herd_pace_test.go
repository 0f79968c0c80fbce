package harness

import (
	"testing"
	"time"
)

// TestHerdPaceSlowsOnceTheVerdictHasItsSamples: the herd watch samples every 400 ms
// until it has seen herdContendedWanted samples with two waiters or more, and every
// 4 s after (a sample costs the servers; the verdict needs no more).
func TestHerdPaceSlowsOnceTheVerdictHasItsSamples(t *testing.T) {
	for _, tc := range []struct {
		contended int
		want      time.Duration
	}{
		{0, 400 * time.Millisecond},
		{herdContendedWanted - 1, 400 * time.Millisecond},
		{herdContendedWanted, 4 * time.Second},
		{10 * herdContendedWanted, 4 * time.Second},
	} {
		if got := herdPace(tc.contended); got != tc.want {
			t.Errorf("herdPace(%d) = %s, want %s", tc.contended, got, tc.want)
		}
	}
}
