package simsched

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target a property test runs best with:
// a simulated run's live heap is small (a few MB) while its clients allocate fast
// (go-zookeeper 3 MiB of buffers per connection, go-redis a pool and a
// handshake per connection), so at Go's default (100) the collector runs about
// once a schedule. At 400 the ZooKeeper wire mode ran 1.6 to 1.7 times as many
// schedules a second, the Redis simulator 1.1 to 1.4 times, the in-process mode
// 1.1 to 1.5 times (two sittings, BENCHMARKS.md, 2026-12-01).
const GCPercent = 400

// TuneGC sets the collector's target to GCPercent unless GOGC says otherwise: a
// test binary's TestMain calls it (docs/property-testing.md shows a user's). It
// changes the whole process, so library code never calls it.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
}
