package zksim

import (
	"math/rand/v2"
	"slices"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
)

// randomRun runs one schedule drawn with rng the way the rapid property draws one (a
// number of clients, the kinds left out, then steps: an action key, a kind of it the
// run may take, a client), with steps steps, then the liveness phase and the final
// checks. It must run in a bubble.
func randomRun(rng *rand.Rand, cfg LockConfig, steps int) (*lockRun, *Failure) {
	n := cfg.Clients
	if n == 0 {
		n = 2 + rng.IntN(4)
	}
	run, err := newLockRun(cfg, n, nil)
	if err != nil {
		return nil, err.(*Failure)
	}
	defer run.Teardown()
	run.leftOut = map[StepKind]bool{}
	for _, k := range OptionalKinds() {
		if rng.IntN(2) == 0 {
			run.leftOut[k] = true
		}
	}
	keys := simsched.ActionKeys(StepKinds())
	for range steps {
		var possible []StepKind
		for range 100 { // as rapid's Repeat, which skips impossible actions
			if possible = run.Choices(keys[rng.IntN(len(keys))].Kinds); len(possible) > 0 {
				break
			}
		}
		kind := possible[rng.IntN(len(possible))]
		ids := run.enabled(kind)
		id := ids[0]
		for d, k := rng.IntN(len(run.Slots)), 0; k < len(run.Slots); k++ { // as pick
			if i := (d + k) % len(run.Slots); slices.Contains(ids, i) {
				id = i
				break
			}
		}
		if err := run.Do(Step{Kind: kind, Target: id}); err != nil {
			return run, failf(FailHarness, "%v", err)
		}
		if err := run.CheckExclusion(); err != nil {
			return run, err.(*Failure)
		}
	}
	if err := run.Finish(); err != nil {
		return run, err.(*Failure)
	}
	return run, nil
}
