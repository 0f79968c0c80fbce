package zksim

import "testing"

// TestWatchesLast: a replay whose only difference is where go-zookeeper's re-sent
// setWatches landed among a step's requests is the same trace; any other reordering
// is a divergence.
func TestWatchesLast(t *testing.T) {
	run := "114. run c3: setWatches zxid 27 data [/l/a] exist [] child [] = ok; getChildren2 /l = [a b]; getData /l/a (watch) = czxid 19"
	replay := "114. run c3: getChildren2 /l = [a b]; setWatches zxid 27 data [/l/a] exist [] child [] = ok; getData /l/a (watch) = czxid 19"
	if watchesLast(run) != watchesLast(replay) {
		t.Errorf("setWatches moved among a step's requests is a divergence:\n%s\n%s", watchesLast(run), watchesLast(replay))
	}
	swapped := "114. run c3: getData /l/a (watch) = czxid 19; getChildren2 /l = [a b]; setWatches zxid 27 data [/l/a] exist [] child [] = ok"
	if watchesLast(run) == watchesLast(swapped) {
		t.Error("two other requests swapped are the same trace")
	}
	if plain := "3. acquire c1: create /l/x = ok"; watchesLast(plain) != plain {
		t.Errorf("a line without setWatches changed: %q", watchesLast(plain))
	}
}
