package cause

import (
	"fmt"

	"github.com/zlockcheck/zlockcheck/histories"
)

// ClassifyBlocked says why a lock stayed blocked after the faults healed (the
// liveness verdict), when the history can: owners are the processes whose entries
// held it (-1 for an entry of no known worker). An owner whose last release of key
// was acknowledged while a failover had cut the standby off from the primary, before
// the primary crashed, released the lock on a primary whose data was then lost: the
// promoted standby has the entry back, and a lock without expiry stays blocked for
// ever. That is the server losing a write (ServerLost), not the recipe; nothing
// else is classed, and ok is false.
func ClassifyBlocked(h histories.History, key string, owners []int) (Finding, bool) {
	faults := faults(h)
	for _, p := range owners {
		if p < 0 {
			continue
		}
		released, ok := lastRelease(h, key, p)
		if !ok {
			continue
		}
		for _, x := range faults {
			if x.class != "failover" || released < x.start || released > x.stop {
				continue
			}
			f := Finding{Class: ServerLost, Holder: p, Next: -1, At: x.stop}
			f.Why = fmt.Sprintf("process %d's release was acknowledged at %s, during a failover (from %s) that promoted %s, which never saw it; the promoted server has process %d's entry again and nothing removes it",
				p, at(released), at(x.start), x.promoted, p)
			f.Fix = failoverFix(x) + "; or a lock whose entries expire"
			return f, true
		}
	}
	return Finding{}, false
}

// lastRelease is when process p's last release of key was acknowledged (ok, not a
// lost report), if it had one.
func lastRelease(h histories.History, key string, p int) (int64, bool) {
	var at int64
	found := false
	for _, op := range h {
		if !op.Process.Nemesis && op.Process.ID == p && op.Key == key && op.F == histories.FRelease && op.Type == histories.OK && !op.Lost {
			at, found = op.Time, true
		}
	}
	return at, found
}
