package zksim

import (
	"slices"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
)

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

// TestSetWatchesGoFirst: go-zookeeper's re-sent watches, arriving behind a request its
// client queued while disconnected, are served first in the bubble: the order a
// replay could not otherwise repeat (CI, 2026-11-30).
func TestSetWatchesGoFirst(t *testing.T) {
	s := NewWire()
	c := s.NewWireClient("c0")
	wc := simsched.NewServerEnd(nil, 8)
	c.wire.conn = wc
	var get, watches juteWriter
	get.int32(7)
	get.int32(opGetChildren2)
	get.string("/l")
	get.bool(true)
	watches.int32(-8)
	watches.int32(opSetWatches)
	watches.int64(27)
	watches.strings([]string{"/l/a"})
	watches.strings(nil)
	watches.strings(nil)
	s.mu.Lock()
	s.received(c.wire, wc, get.b)
	s.received(c.wire, wc, watches.b)
	var kinds []reqKind
	for _, r := range c.pending {
		kinds = append(kinds, r.kind)
	}
	s.mu.Unlock()
	if want := []reqKind{reqSetWatches, reqChildren}; !slices.Equal(kinds, want) {
		t.Errorf("pending %v, want %v", kinds, want)
	}
}
