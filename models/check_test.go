package models

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

type checkCase struct {
	name    string
	kind    Kind
	permits int
	history string
	want    Verdict
	// For invalid histories: the key that must be named invalid, the time of
	// the first violation, and substrings of the witness.
	badKey  string
	first   int64
	witness []string
	// porcupineDiffers marks the one documented case where porcupine, which
	// sees only times, disagrees.
	porcupineDiffers bool
}

var checkCases = []checkCase{
	// Mutex.
	{name: "mutex/empty", kind: Mutex, history: "", want: Valid},
	{name: "mutex/one after the other", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		0 2 invoke acquire
		2 1 invoke release
		3 1 ok release
		4 2 ok acquire
		5 2 invoke release
		6 2 ok release`},
	{name: "mutex/double grant", kind: Mutex, want: Invalid, first: 3,
		witness: []string{"process 1 held the lock from index 0 (acquire invoked at 0s, ok at index 1 at 1ns) to index 4 (release invoked at 5ns, ok)", "process 2 held it from index 2", "2 holders at once, a mutex allows 1"},
		history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		3 2 ok acquire
		5 1 invoke release
		6 1 ok release
		7 2 invoke release
		8 2 ok release`},
	{name: "mutex/touching holds", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		5 1 invoke release
		5 2 ok acquire
		6 1 ok release`},
	{name: "mutex/overlap by one ns", kind: Mutex, want: Invalid, first: 4, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		4 2 ok acquire
		5 1 invoke release
		6 1 ok release`},
	{name: "mutex/ok while the release is under way", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		3 1 invoke release
		4 2 ok acquire
		9 1 ok release`},
	{name: "mutex/info acquire may not have happened", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 2 invoke acquire
		2 2 ok acquire
		10 1 info acquire
		11 2 invoke release
		12 2 ok release`},
	{name: "mutex/pending acquire may not have happened", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 2 invoke acquire
		2 2 ok acquire
		11 2 invoke release
		12 2 ok release`},
	{name: "mutex/crashed holder releases at its release invoke", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		3 1 invoke release
		9 1 info release
		4 2 ok acquire`},
	{name: "mutex/acquire before the crashed holder's release", kind: Mutex, want: Invalid, first: 2,
		witness: []string{"release invoked at 3ns, outcome unknown"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		1 2 invoke acquire
		2 2 ok acquire
		3 1 invoke release
		9 1 info release`},
	{name: "mutex/pending release", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		3 1 invoke release
		4 2 ok acquire`},
	{name: "mutex/never released", kind: Mutex, want: Invalid, first: 100,
		witness: []string{"never released it"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		99 2 invoke acquire
		100 2 ok acquire`},
	{name: "mutex/lost release ends the hold", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		5 1 invoke release lost
		5 1 ok release lost
		6 2 ok acquire`},
	{name: "mutex/lost release after another's acquire", kind: Mutex, want: Invalid, first: 4,
		witness: []string{"recorded as lost"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		4 2 ok acquire
		5 1 invoke release lost
		5 1 ok release lost`},
	{name: "mutex/lost release without a hold is ignored", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke release
		3 1 ok release
		4 1 invoke release lost
		4 1 ok release lost`},
	{name: "mutex/failed release ends the hold", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		3 1 invoke release
		3 2 ok acquire
		4 1 fail release`},
	{name: "mutex/acquire before a failed release", kind: Mutex, want: Invalid, first: 2,
		witness: []string{"release invoked at 3ns, failed"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		1 2 invoke acquire
		2 2 ok acquire
		3 1 invoke release
		4 1 fail release`},
	{name: "mutex/failed acquire has no effect", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		3 2 fail acquire
		4 1 invoke release
		5 1 ok release`},
	{name: "mutex/release without hold", kind: Mutex, want: Invalid, first: 1,
		witness: []string{"process 1 released the lock at index 0", "never acquired it"}, history: `
		0 1 invoke release
		1 1 ok release`},
	{name: "mutex/released twice", kind: Mutex, want: Invalid, first: 5,
		witness: []string{"did not hold it", "its last hold ended with the release at index 2"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke release
		3 1 ok release
		4 1 invoke release
		5 1 ok release`},
	{name: "mutex/failed and crashed releases without hold", kind: Mutex, want: Valid, history: `
		0 1 invoke release
		1 1 fail release
		2 1 invoke release
		3 1 info release`},
	// A process's ops are ordered even when their times tie: this process
	// released a lock it did not hold, then acquired it. Porcupine sees two
	// operations at the same instant, which it may order either way, and
	// finds acquire-then-release.
	{name: "mutex/process order at equal times", kind: Mutex, want: Invalid, first: 0, porcupineDiffers: true,
		witness: []string{"never acquired it"}, history: `
		0 1 invoke release
		0 1 ok release
		0 1 invoke acquire
		0 1 ok acquire`},
	{name: "mutex/re-entrant acquire", kind: Mutex, want: Invalid, first: 3,
		witness: []string{"process 1 acquired the lock again while still holding it"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire`},
	{name: "mutex/nemesis and other functions are ignored", kind: Mutex, want: Valid, history: `
		0 n invoke start
		0 1 invoke acquire
		1 1 ok acquire
		1 n info start
		2 2 invoke sleep
		3 2 ok sleep
		4 1 invoke release
		5 1 ok release`},
	{name: "mutex/one key of several invalid", kind: Mutex, want: Invalid, badKey: "b", first: 5,
		witness: []string{`process 2 held "b"`, "process 1 held it"}, history: `
		0 1 invoke acquire k=a
		1 1 ok acquire k=a
		0 2 invoke acquire k=b
		1 2 ok acquire k=b
		2 3 invoke acquire k=a
		2 1 invoke release k=a
		3 1 ok release k=a
		3 3 ok acquire k=a
		4 1 invoke acquire k=b
		5 1 ok acquire k=b`},
	{name: "mutex/info on one key, process goes on with another", kind: Mutex, want: Valid, history: `
		0 1 invoke acquire k=a
		1 1 ok acquire k=a
		2 1 invoke acquire k=b
		3 1 info acquire k=b
		4 1 invoke release k=a
		5 1 info release k=a`},

	// Semaphore.
	{name: "semaphore/2 of 2 permits", kind: Semaphore, permits: 2, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		0 2 invoke acquire
		2 2 ok acquire
		5 1 invoke release
		6 1 ok release
		5 2 invoke release
		6 2 ok release`},
	{name: "semaphore/3 holders of 2 permits", kind: Semaphore, permits: 2, want: Invalid, first: 3,
		witness: []string{"process 1", "process 2", "process 3", "3 holders at once, a semaphore with 2 permits allows 2"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		0 2 invoke acquire
		2 2 ok acquire
		0 3 invoke acquire
		3 3 ok acquire
		5 1 invoke release
		6 1 ok release`},
	{name: "semaphore/3 holders of 2 permits, touching", kind: Semaphore, permits: 2, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		0 2 invoke acquire
		2 2 ok acquire
		0 3 invoke acquire
		3 1 invoke release
		3 3 ok acquire
		4 1 ok release`},
	{name: "semaphore/one process holds 2 permits", kind: Semaphore, permits: 2, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 2 fail acquire
		6 1 invoke release
		7 1 ok release
		8 2 invoke acquire
		9 2 ok acquire`},
	{name: "semaphore/one process holds 2 permits, another a third", kind: Semaphore, permits: 2, want: Invalid, first: 5, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 2 ok acquire`},
	{name: "semaphore/permits default to 1", kind: Semaphore, want: Invalid, first: 2, history: `
		0 1 invoke acquire
		1 1 ok acquire
		0 2 invoke acquire
		2 2 ok acquire`},
	{name: "semaphore/release without hold", kind: Semaphore, permits: 3, want: Invalid, first: 3, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke release
		3 2 ok release`},

	// RWLock.
	{name: "rwlock/readers overlap", kind: RWLock, want: Valid, history: `
		0 1 invoke acquire m=read
		1 1 ok acquire m=read
		0 2 invoke acquire m=read
		2 2 ok acquire m=read
		5 1 invoke release
		6 1 ok release
		5 2 invoke release m=read
		6 2 ok release m=read`},
	{name: "rwlock/writer and reader overlap", kind: RWLock, want: Invalid, first: 2,
		witness: []string{"for writing", "for reading", "a write hold overlapped another hold"}, history: `
		0 1 invoke acquire m=write
		1 1 ok acquire m=write
		0 2 invoke acquire m=read
		2 2 ok acquire m=read
		5 1 invoke release
		6 1 ok release`},
	{name: "rwlock/reader then writer overlap", kind: RWLock, want: Invalid, first: 2, history: `
		0 1 invoke acquire m=read
		1 1 ok acquire m=read
		0 3 invoke acquire m=read
		1 3 ok acquire m=read
		0 2 invoke acquire m=write
		2 2 ok acquire m=write`},
	{name: "rwlock/writers overlap, mode-less acquire is a write", kind: RWLock, want: Invalid, first: 2, history: `
		0 1 invoke acquire
		1 1 ok acquire
		0 2 invoke acquire m=write
		2 2 ok acquire m=write`},
	{name: "rwlock/writer after readers, touching", kind: RWLock, want: Valid, history: `
		0 1 invoke acquire m=read
		1 1 ok acquire m=read
		0 2 invoke acquire m=read
		2 2 ok acquire m=read
		0 3 invoke acquire m=write
		4 1 invoke release
		5 2 invoke release
		5 3 ok acquire m=write
		6 1 ok release
		6 2 ok release`},
	{name: "rwlock/re-entrant read", kind: RWLock, want: Valid, history: `
		0 1 invoke acquire m=read
		1 1 ok acquire m=read
		2 1 invoke acquire m=read
		3 1 ok acquire m=read
		4 1 invoke release
		5 1 ok release
		6 1 invoke release
		7 1 ok release`},
	{name: "rwlock/upgrade while reading", kind: RWLock, want: Invalid, first: 3, history: `
		0 1 invoke acquire m=read
		1 1 ok acquire m=read
		2 1 invoke acquire m=write
		3 1 ok acquire m=write`},
	{name: "rwlock/crashed writer", kind: RWLock, want: Valid, history: `
		0 1 invoke acquire m=write
		1 1 ok acquire m=write
		2 1 invoke release
		3 1 info release
		0 2 invoke acquire m=read
		2 2 ok acquire m=read`},
	{name: "rwlock/release without hold", kind: RWLock, want: Invalid, first: 1, history: `
		0 1 invoke release m=read
		1 1 ok release m=read`},

	// Re-entrant mutex.
	{name: "reentrant/nested", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		4 1 invoke acquire
		5 1 ok acquire
		6 1 invoke release
		7 1 ok release
		8 1 invoke release
		9 1 ok release
		10 1 invoke release
		11 1 ok release
		10 2 ok acquire
		12 2 invoke release
		13 2 ok release`},
	{name: "reentrant/another process acquires while the depth is 1", kind: Reentrant, want: Invalid, first: 7,
		witness: []string{"process 1 held the lock (nested 2 deep) from index 0 (acquire invoked at 0s, ok at index 1 at 1ns) to index 8 (release invoked at 8ns, ok)",
			"process 2 held it from index 4", "2 holders at once, a re-entrant mutex allows 1"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 1 invoke release
		6 1 ok release
		7 2 ok acquire
		8 1 invoke release
		9 1 ok release`},
	{name: "reentrant/another process acquires while the depth is 2", kind: Reentrant, want: Invalid, first: 4,
		witness: []string{"(nested 2 deep)", "never released it"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		0 2 invoke acquire
		4 2 ok acquire`},
	{name: "reentrant/release without hold", kind: Reentrant, want: Invalid, first: 9,
		witness: []string{"process 1 released the lock at index 8", "did not hold it", "its last hold ended with the release at index 6"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 1 invoke release
		5 1 ok release
		6 1 invoke release
		7 1 ok release
		8 1 invoke release
		9 1 ok release`},
	{name: "reentrant/release without ever acquiring", kind: Reentrant, want: Invalid, first: 1,
		witness: []string{"never acquired it"}, history: `
		0 2 invoke release
		1 2 ok release`},
	{name: "reentrant/failed inner release ends the whole hold", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 1 invoke release
		6 1 fail release
		5 2 ok acquire`},
	{name: "reentrant/release ok after a failed inner release", kind: Reentrant, want: Invalid, first: 9,
		witness: []string{"did not hold it", "its last hold ended with the release at index 4"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 1 invoke release
		5 1 fail release
		8 1 invoke release
		9 1 ok release`},
	{name: "reentrant/lost at depth 2 ends the whole hold", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 1 invoke release lost
		5 1 ok release lost
		6 2 ok acquire`},
	{name: "reentrant/crashed inner release may end the whole hold", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 1 invoke release
		9 1 info release
		6 2 ok acquire`},
	{name: "reentrant/pending inner release may end the whole hold", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 1 invoke release
		6 2 ok acquire`},
	{name: "reentrant/acquire before a crashed inner release", kind: Reentrant, want: Invalid, first: 5,
		witness: []string{"release invoked at 6ns, outcome unknown at depth 2, which may end the whole hold"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 2 ok acquire
		6 1 invoke release
		9 1 info release`},
	{name: "reentrant/inner release does not free the lock", kind: Reentrant, want: Invalid, first: 7, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 2 invoke acquire
		5 1 invoke release
		6 1 ok release
		7 2 ok acquire`},
	{name: "reentrant/crashed nested acquire: the hold goes on", kind: Reentrant, want: Invalid, first: 6, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 info acquire
		4 2 invoke acquire
		6 2 ok acquire`},
	{name: "reentrant/failed nested acquire has no effect", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 fail acquire
		4 2 invoke acquire
		5 1 invoke release
		6 1 ok release
		6 2 ok acquire`},
	{name: "reentrant/crashed first acquire may not have happened", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		3 1 info acquire
		1 2 invoke acquire
		2 2 ok acquire
		4 2 invoke acquire
		5 2 ok acquire`},
	// As under mutex: a process's own ops are ordered at equal times, which
	// porcupine cannot see (see "mutex/process order at equal times").
	{name: "reentrant/process order at equal times", kind: Reentrant, want: Invalid, first: 4, porcupineDiffers: true,
		witness: []string{"did not hold it"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke release
		3 1 ok release
		4 1 invoke release
		4 1 ok release
		4 1 invoke acquire
		4 1 ok acquire`},
	{name: "reentrant/two processes hold one after the other, each nested", kind: Reentrant, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke acquire
		3 1 ok acquire
		4 1 invoke release
		5 1 ok release
		6 1 invoke release
		0 2 invoke acquire
		6 2 ok acquire
		7 1 ok release
		8 2 invoke acquire
		9 2 ok acquire
		10 2 invoke release
		11 2 ok release
		12 2 invoke release
		13 2 ok release`},

	// Knossos's owner-less mutex.
	{name: "knossos/anyone may release", kind: KnossosMutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke release
		3 2 ok release
		4 2 invoke acquire
		5 2 ok acquire`},
	{name: "knossos/acquired twice", kind: KnossosMutex, want: Invalid, first: 3,
		witness: []string{"Knossos's owner-less mutex", "p2 acquire"}, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 2 invoke acquire
		3 2 ok acquire`},
	{name: "knossos/failed release is dropped", kind: KnossosMutex, want: Invalid, first: 5, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke release
		3 1 fail release
		4 2 invoke acquire
		5 2 ok acquire`},
	{name: "knossos/info acquire may have happened", kind: KnossosMutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 info acquire
		2 2 invoke release
		3 2 ok release`},
	{name: "knossos/release of a free lock", kind: KnossosMutex, want: Invalid, first: 1, history: `
		0 2 invoke release
		1 2 ok release`},
	{name: "knossos/pending release may happen", kind: KnossosMutex, want: Valid, history: `
		0 1 invoke acquire
		1 1 ok acquire
		2 1 invoke release
		3 2 invoke acquire
		4 2 ok acquire`},
	{name: "knossos/several keys", kind: KnossosMutex, want: Invalid, badKey: "y", first: 5, history: `
		0 1 invoke acquire k=x
		1 1 ok acquire k=x
		2 2 invoke acquire k=y
		3 2 ok acquire k=y
		4 3 invoke acquire k=y
		5 3 ok acquire k=y`},
}

func TestCheck(t *testing.T) {
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(t, tc.history)
			cfg := Config{Kind: tc.kind, Permits: tc.permits}
			res, err := Check(h, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s; keys: %+v", res.Verdict, tc.want, res.Keys)
			}
			// The porcupine models agree with every hand-written case.
			if pv := porcupineVerdict(t, h, cfg); (pv != tc.want) != tc.porcupineDiffers {
				t.Errorf("porcupine says %s, holds checker %s", pv, tc.want)
			}
			for i, kr := range res.Keys {
				if i > 0 && res.Keys[i-1].Key >= kr.Key {
					t.Errorf("keys not sorted: %q before %q", res.Keys[i-1].Key, kr.Key)
				}
				wantChecker := CheckerHolds
				if tc.kind == KnossosMutex {
					wantChecker = CheckerPorcupine
				}
				if kr.Checker != wantChecker {
					t.Errorf("key %q checked by %s, want %s", kr.Key, kr.Checker, wantChecker)
				}
				if kr.Verdict == Valid {
					if kr.Witness != "" || len(kr.Window) != 0 || kr.FirstViolation != -1 {
						t.Errorf("valid key %q has witness %q, window %d ops, first violation %d", kr.Key, kr.Witness, len(kr.Window), kr.FirstViolation)
					}
					if kr.Key == tc.badKey && tc.want == Invalid {
						t.Errorf("key %q is valid, want invalid", kr.Key)
					}
					continue
				}
				if kr.Key != tc.badKey {
					t.Errorf("key %q is %s, want only %q invalid", kr.Key, kr.Verdict, tc.badKey)
				}
				if kr.FirstViolation != tc.first {
					t.Errorf("first violation at %d, want %d", kr.FirstViolation, tc.first)
				}
				for _, s := range tc.witness {
					if !strings.Contains(kr.Witness, s) {
						t.Errorf("witness %q lacks %q", kr.Witness, s)
					}
				}
				if len(kr.Window) == 0 {
					t.Fatalf("invalid key %q has no window", kr.Key)
				}
				if r := windowIllegal(t, kr, cfg); r != porcupine.Illegal && !tc.porcupineDiffers {
					t.Errorf("porcupine says the window is %s, want Illegal:\n%s", r, describeHistory(kr.Window))
				}
				t.Logf("witness: %s", kr.Witness)
			}
		})
	}
}

func TestCheckCountsOps(t *testing.T) {
	h := hist(t, `
		0 n invoke start
		0 1 invoke acquire k=a
		1 1 ok acquire k=a
		1 n info start
		2 2 invoke acquire k=b`)
	res, err := Check(h, Config{Kind: Mutex})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Keys) != 2 || res.Keys[0].Key != "a" || res.Keys[0].Ops != 2 || res.Keys[1].Key != "b" || res.Keys[1].Ops != 1 {
		t.Fatalf("keys: %+v", res.Keys)
	}
	if res.Duration <= 0 {
		t.Errorf("duration %v", res.Duration)
	}
}

func TestCheckRejectsBadHistories(t *testing.T) {
	cases := []struct {
		name, history, want string
		kind                Kind
	}{
		{"completion without invoke", "0 1 ok acquire", "op 0: ok acquire by process 1 without an open invoke", Mutex},
		{"two open ops", "0 1 invoke acquire\n1 1 invoke release", "op 1: process 1 invokes release while its acquire invoked at op 0 is still open", Mutex},
		{"reuse after info", "0 1 invoke acquire\n1 1 info acquire\n2 1 invoke acquire", "op 2: process 1 is used again on the lock after its op 1 completed as info", Mutex},
		{"function mismatch", "0 1 invoke acquire\n1 1 ok release", "op 1: completion of release", Mutex},
		{"key mismatch", "0 1 invoke acquire k=a\n1 1 ok acquire k=b", "op 1: completion on key", Mutex},
		{"completion before invoke", "5 1 invoke acquire\n4 1 ok acquire", "op 1: completes at 4, before its invoke", Mutex},
		{"time goes backwards", "5 1 invoke acquire\n6 1 ok acquire\n4 1 invoke release", "op 2: process 1's time goes backwards", Mutex},
		{"unknown type", "0 1 begin acquire", `op 0: unknown type "begin"`, Mutex},
		{"lost acquire", "0 1 invoke acquire lost", "op 0: only a release can be lost", Mutex},
		{"bad mode", "0 1 invoke acquire m=shared", `op 0: unknown rwlock mode "shared"`, RWLock},
		{"no function", "0 1 invoke -", "", Mutex},
		{"register op on a lock key", "0 1 invoke acquire\n1 1 ok acquire\n2 2 invoke read\n3 2 ok read v=0",
			"op 2: read on the lock, which has lock ops (acquire/release, the first at op 0): a key is a lock or a register, not both", Mutex},
		{"lock op on a register key", "0 1 invoke write k=c v=1\n1 1 ok write k=c\n2 2 invoke release k=c",
			`op 2: release on "c", which has register ops (read, write or counter-final, the first at op 0)`, Reentrant},
		{"counter-final on a lock key", "0 1 invoke acquire k=c\n1 n info counter-final k=c v={\"value\":1}",
			`op 1: counter-final on "c", which has lock ops`, Mutex},
		{"other op on a register key", "0 1 invoke read k=x\n1 1 ok read k=x v=0\n2 1 invoke cas k=x",
			`op 2: cas on "x", which has register ops (read, write or counter-final, the first at op 0): other ops are not allowed on a register key`, Mutex},
		{"register op on a key with other ops", "0 1 invoke cas k=x\n1 1 ok cas k=x\n2 1 invoke write k=x v=1",
			`op 2: write on "x", which has op 0 (cas): a register key has only read and write ops`, Mutex},
		{"read without a value", "0 1 invoke read\n1 1 ok read", "op 1: read result: missing, want an integer", Mutex},
		{"read of a string", `0 1 invoke read` + "\n" + `1 1 ok read v="3"`, `op 1: read result: "3" is not an integer`, Mutex},
		{"write without a value", "0 1 invoke write\n1 1 ok write v=1", "op 0: write value: missing, want an integer", Mutex},
		{"write of a fraction", "0 1 invoke write v=1.5", "op 0: write value: 1.5 is not an integer", Mutex},
		{"two counter-finals", "0 n info counter-final v={\"value\":1}\n1 n info counter-final v=2", "op 1: a second counter-final on the lock (the first is op 0)", Mutex},
		{"counter-final without a value", "0 n info counter-final v={\"count\":1}", `op 0: counter-final value: {"count":1} has no "value"`, Mutex},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(t, tc.history)
			if tc.name == "no function" {
				h[0].F = ""
				tc.want = "op 0: invoke without a function"
			}
			_, err := Check(h, Config{Kind: tc.kind})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	for _, s := range []string{"mutex", " Semaphore ", "RWLOCK", "reentrant", "knossos-mutex"} {
		if _, err := ParseKind(s); err != nil {
			t.Errorf("ParseKind(%q): %v", s, err)
		}
	}
	if k, _ := ParseKind("RWLock"); k != RWLock {
		t.Errorf("ParseKind(RWLock) = %q", k)
	}
	if k, _ := ParseKind(" Reentrant"); k != Reentrant {
		t.Errorf("ParseKind(Reentrant) = %q", k)
	}
	if _, err := ParseKind("lock"); err == nil || !strings.Contains(err.Error(), "mutex, semaphore, rwlock, reentrant, knossos-mutex") {
		t.Errorf("ParseKind(lock): %v", err)
	}
	if _, err := Check(nil, Config{Kind: "spinlock"}); err == nil {
		t.Error("Check accepted kind spinlock")
	}
	if _, err := Check(nil, Config{Kind: Semaphore, Permits: -1}); err == nil {
		t.Error("Check accepted -1 permits")
	}
	if res, err := Check(nil, Config{Kind: Mutex}); err != nil || res.Verdict != Valid || len(res.Keys) != 0 {
		t.Errorf("empty history: %+v, %v", res, err)
	}
	if Worse(Valid, Unknown) != Unknown || Worse(Invalid, Unknown) != Invalid || Worse(Valid, Valid) != Valid {
		t.Error("Worse orders verdicts wrong")
	}
}

func TestKnossosTimeoutIsUnknown(t *testing.T) {
	h := GenerateMutexHistory(GenConfig{Ops: 20000, Processes: 20, CrashRate: 0.05, Seed: 7})
	res, err := Check(h, Config{Kind: KnossosMutex, Timeout: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Unknown || res.Keys[0].Verdict != Unknown || !strings.Contains(res.Keys[0].Witness, "within 1µs") {
		t.Fatalf("verdict %s, keys %+v", res.Verdict, res.Keys)
	}
}

func TestWriteVisualization(t *testing.T) {
	for _, tc := range checkCases {
		if tc.want != Invalid {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Kind: tc.kind, Permits: tc.permits}
			res, err := Check(hist(t, tc.history), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteVisualization(&buf, res, cfg); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if !strings.Contains(out, "<html") || !strings.Contains(out, "violation of") {
				t.Fatalf("no visualization in %d bytes", len(out))
			}
		})
	}
	res, err := Check(hist(t, "0 1 invoke acquire\n1 1 ok acquire"), Config{Kind: Mutex})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteVisualization(&bytes.Buffer{}, res, Config{Kind: Mutex}); !errors.Is(err, ErrNothingToVisualize) {
		t.Errorf("valid result: %v, want ErrNothingToVisualize", err)
	}
}

// TestWorseOrdersErrorInvalidUnknownValid: the one fold of verdicts, for a run's
// checks and for the runs of a suite, a matrix or an explore session alike.
func TestWorseOrdersErrorInvalidUnknownValid(t *testing.T) {
	order := []Verdict{Valid, Unknown, Invalid, Error}
	for i, a := range order {
		for j, b := range order {
			if got, want := Worse(a, b), order[max(i, j)]; got != want {
				t.Errorf("Worse(%s, %s) = %s, want %s", a, b, got, want)
			}
		}
	}
}

// TestJudgeMakesTheLockAdvisoryWhenItProtectsData: with a register key, the lock's
// own keys do not decide the verdict; the report's own checks always do.
func TestJudgeMakesTheLockAdvisoryWhenItProtectsData(t *testing.T) {
	checks := []Judged{
		{Verdict: Invalid, Checker: CheckerHolds, Lock: true},
		{Verdict: Valid, Checker: CheckerRegister + "+" + CheckerFinalValue, Lock: true},
		{Verdict: Unknown, Checker: "coverage"},
	}
	v, advisory := Judge(checks)
	if v != Unknown || !slices.Equal(advisory, []bool{true, false, false}) {
		t.Errorf("verdict %s, advisory %v; want unknown, only the lock's key advisory", v, advisory)
	}
	if v, _ := Judge(checks[:1]); v != Invalid {
		t.Errorf("a lock without data: %s, want invalid", v)
	}
}

// TestJudgeNeverMakesARecipeBugAdvisory: beside protected data, a lock check whose
// violation is a recipe bug decides the verdict; an honest one stays advisory.
func TestJudgeNeverMakesARecipeBugAdvisory(t *testing.T) {
	data := Judged{Verdict: Valid, Checker: CheckerRegister + "+" + CheckerFinalValue, Lock: true}
	for _, c := range []struct {
		lock         Judged
		want         Verdict
		wantAdvisory bool
	}{
		{Judged{Verdict: Invalid, Checker: CheckerHolds, Lock: true}, Valid, true},
		{Judged{Verdict: Invalid, Checker: CheckerHolds, Lock: true, Bug: true}, Invalid, false},
	} {
		v, advisory := Judge([]Judged{c.lock, data})
		if v != c.want || advisory[0] != c.wantAdvisory || advisory[1] {
			t.Errorf("lock %+v beside valid data: verdict %s, advisory %v; want %s, lock advisory %v", c.lock, v, advisory, c.want, c.wantAdvisory)
		}
	}
}
