package zlcmutex

import "fmt"

// Mutant selects one deliberate bug; MutantNone is the correct recipe. Each mutant
// is the same code with one idea switched off, so a test that catches it shows that
// this idea matters.
type Mutant int

// The mutants.
const (
	// MutantNone is zlc-mutex itself.
	MutantNone Mutant = iota
	// MutantNoRecheck trusts the predecessor's disappearance: once the predecessor
	// watch fires (or the predecessor is found gone) it takes the lock without
	// reading the children again, although an earlier node may still be there.
	MutantNoRecheck
	// MutantUnprotectedCreate creates a plain ephemeral-sequential node and, when the
	// create's reply is lost, simply creates another one: the first may exist, owned
	// by the still-live session, and then blocks the queue until the session ends.
	MutantUnprotectedCreate
	// MutantDeleteLowest, when a timed acquire gives up, deletes the lowest child
	// (usually the holder's node) instead of its own.
	MutantDeleteLowest
	// MutantOffByOne counts the first two children as holding the lock.
	MutantOffByOne
	// MutantIgnoreLost never reports a lost lock: a holder whose connection dropped or
	// whose session expired goes on believing it holds.
	MutantIgnoreLost
	// MutantHerd lists the children with a watch and waits for that watch instead of
	// watching its predecessor: every change of the queue wakes every waiter, and each
	// reads the children again (the herd effect). It is still safe and live: not in
	// Mutants(), whose every member breaks one of the two; the herd check flags it.
	MutantHerd
	// MutantMissedWakeup, when its predecessor is already gone as it sets the watch
	// (deleted between its getChildren and its exists: a round trip's window), sets no
	// watch and does not read the children again: it waits for a wake-up that never
	// comes, until its session changes or it gives up, its node the lowest and
	// blocking every waiter behind it.
	MutantMissedWakeup
	// MutantWithdrawnWatch leaves the predecessor watch of an acquire that gave up
	// armed with its handler: when the predecessor goes while no acquire is in flight
	// (between the give-up and the next acquire: a think time's window), the handler,
	// run as the next acquire starts, takes the wake-up for its own and starts the
	// withdrawn attempt over, creating a fresh lock node that nobody waits with, which
	// blocks everyone once it is the lowest.
	MutantWithdrawnWatch
	// MutantSwallowedRelease swallows a release's error: when the delete of its node
	// fails with the outcome unknown (the connection lost mid-release, the request
	// perhaps never sent), it reports the lock released and forgets the node, which
	// stays on the servers under the live session and blocks every waiter (Kazoo's
	// and many hand-written recipes' `except: pass` around the delete). Only a fault
	// in force while a holder releases exposes it (issue 38).
	MutantSwallowedRelease
)

// Mutants lists every mutant that breaks safety or liveness (MutantNone and
// MutantHerd excluded).
func Mutants() []Mutant {
	return []Mutant{MutantNoRecheck, MutantUnprotectedCreate, MutantDeleteLowest, MutantOffByOne, MutantIgnoreLost,
		MutantMissedWakeup, MutantWithdrawnWatch, MutantSwallowedRelease}
}

// String returns the mutant's recipe name ("zlc-mutex" for MutantNone).
func (m Mutant) String() string {
	switch m {
	case MutantNone:
		return "zlc-mutex"
	case MutantNoRecheck:
		return "mutant-no-recheck"
	case MutantUnprotectedCreate:
		return "mutant-unprotected-create"
	case MutantDeleteLowest:
		return "mutant-delete-lowest"
	case MutantOffByOne:
		return "mutant-off-by-one"
	case MutantIgnoreLost:
		return "mutant-ignore-lost"
	case MutantHerd:
		return "mutant-herd"
	case MutantMissedWakeup:
		return "mutant-missed-wakeup"
	case MutantWithdrawnWatch:
		return "mutant-withdrawn-watch"
	case MutantSwallowedRelease:
		return "mutant-swallowed-release"
	}
	return fmt.Sprintf("mutant(%d)", int(m))
}

// Description is one line on what the recipe or mutant does.
func (m Mutant) Description() string {
	switch m {
	case MutantNone:
		return "reference lock: protected ephemeral-sequential node, predecessor watch, children re-read after every wake-up, lost on disconnect/expiry, czxid token, fencing"
	case MutantNoRecheck:
		return "zlc-mutex that takes the lock as soon as its predecessor is gone, without re-reading the children"
	case MutantUnprotectedCreate:
		return "zlc-mutex with a plain ephemeral-sequential create retried blindly after connection loss (orphan node, deadlock)"
	case MutantDeleteLowest:
		return "zlc-mutex that, on acquire timeout, deletes the lowest child instead of its own node"
	case MutantOffByOne:
		return "zlc-mutex in which the first two children both count as holding the lock"
	case MutantIgnoreLost:
		return "zlc-mutex that never reports a lost lock (disconnect or session expiry)"
	case MutantHerd:
		return "zlc-mutex whose waiters watch the lock node's children, not their predecessor (herd effect; safe)"
	case MutantMissedWakeup:
		return "zlc-mutex that, finding its predecessor already gone, sets no watch and does not re-read the children: it waits for a wake-up that never comes (fault-free race)"
	case MutantWithdrawnWatch:
		return "zlc-mutex whose given-up acquire leaves its predecessor watch armed: fired between acquires, it creates a lock node nobody waits with (fault-free race)"
	case MutantSwallowedRelease:
		return "zlc-mutex whose release swallows a failed delete: a node left by a delete lost mid-release blocks everyone (a fault while releasing)"
	}
	return ""
}
