// Package models owns the verdict: it decides whether a lock history (a
// histories.History) could have come from a correct lock of a given kind, and
// a counter's reads and writes from a correct register, and explains why not
// when they could not. It knows nothing of ZooKeeper, workers or the
// harness; it reads ops and nothing else.
//
// # Kinds
//
//   - mutex: one holder at a time, owner-aware (a process can only release
//     what it holds).
//   - semaphore: at most Config.Permits holders at a time, owner-aware; a
//     process may hold several permits.
//   - rwlock: one writer, or any number of readers (Op.Mode "read" or
//     "write"; an acquire with no mode is a write). A release ends whatever
//     hold its process has; its own Mode is not consulted.
//   - reentrant: an owner-aware re-entrant mutex. The holder may acquire it
//     again while it holds it (the nesting depth goes up by one); each ok
//     release takes one level off; the lock is free for others only after
//     the outermost release. No other process may hold it while one
//     process's depth is above 0.
//   - knossos-mutex: Knossos's owner-less mutex, for Jepsen histories:
//     acquire is legal only when the lock is free, release only when it is
//     held, by anyone.
//
// A history is partitioned by Op.Key and each key is checked on its own; the
// overall verdict is the worst one (invalid > unknown > valid). A key is a
// lock key or a register key, by the ops it holds: acquire and release make
// a lock key, checked against Config.Kind; read and write (and the
// harness's counter-final op) make a register key, checked as a register
// whatever the kind (see Registers below). A key that has both is a
// structural error.
//
// # What an op means
//
// Nemesis ops are ignored, except counter-final (see Registers). On a lock
// key, ops whose function is neither acquire nor release are paired (so the
// history's structure is still checked) and then ignored; a register key
// has only reads and writes (another function, a cas say, might change the
// register, so ignoring it could raise a false alarm).
//
//   - A failed acquire (fail) had no effect.
//   - An acquire or release that completed as info, or was invoked and never
//     completed (pending), may have taken effect at any time after its
//     invocation, or never. A worker that crashed while holding shows up as
//     a release completed as info: its hold may end at some unknown time
//     after that release was invoked, or never.
//   - A release that failed ends the process's hold too: a release fails when
//     the lock had already been lost, so the process does not hold it
//     afterwards. A failed release by a process that holds nothing has no
//     effect. (Under knossos-mutex, as in Knossos, every failed op is simply
//     dropped, so a release that failed with :not-held does nothing.)
//   - A release marked Lost (the harness records invoke and ok at the same
//     instant when a worker reports it lost the lock) ends the hold at that
//     instant. A Lost release by a process that holds nothing is ignored: it
//     can only be a late report for a hold that has already ended.
//   - A release that completes ok while its process holds nothing on that key
//     (no earlier ok acquire of that process still open) is a violation.
//   - Under mutex, an acquire that completes ok while its process already
//     holds the lock is a violation (two holds at once). Under semaphore a
//     process may hold several permits; under rwlock a process may hold
//     several read holds, but a write hold overlapping any other hold, its
//     own included, is a violation. Under reentrant it nests.
//
// Under reentrant, a release that takes effect takes one level off, but the
// outcomes that mean the lock was lost end the whole hold, whatever its
// depth: a failed release (the lock was already gone), a Lost release (at
// that instant), and a release that completed as info or is still pending
// (it may end the whole hold at any time after its invocation, or never).
// The last rule is the one that is not obvious. Such a release is always
// its process's last op on the key (an info op ends its process on the key;
// a pending op ends it everywhere), so the rest of the hold can only end by
// the lock being lost, when the crashed worker's session expires; and a
// crashed worker gets one release completed as info however deep it held.
// Taking off one level, which the op itself may have done, is subsumed: a
// lock held by a process that does nothing more only constrains the others,
// so ending the hold is always at least as permissive. An ok release by a
// process whose depth is 0 is a violation.
//
// # Structurally bad input
//
// Check returns an error, naming the op's index, for a history it cannot
// interpret (the pairing rules among these are histories.Pairer's, the same
// a history file obeys): an unknown op type, a completion without an open invoke of its
// process (a process has one open op at a time across all keys), an invoke
// while the process already has an open op, a completion whose function or
// key differs from its invoke's, a completion earlier than its invoke or an
// invoke earlier than the process's previous completion, a Lost op that is
// not a release, a rwlock acquire whose mode is neither read nor write, a
// process used again on a key after one of its ops on that key completed as
// info (the semantics above rely on an info op being its process's last on
// that key), a key with both lock ops (acquire, release) and register ops
// (read, write, counter-final), a register key with any other op, a write
// invoke whose value is not a JSON
// integer, an ok read whose value is not one, a counter-final whose value is
// neither {"value":N} nor N, and a second counter-final on a key.
//
// # The holds checker (mutex, semaphore, rwlock, reentrant)
//
// Searching for a linearization explodes on long invalid lock histories, so
// these kinds are checked structurally, in O(n log n) time and linear memory.
// The part of a hold that is certain runs from its acquire's ok to its
// release's invoke, or forever if it is never released. Failed acquires are
// dropped, and acquires that completed as info or never completed are free to
// vanish (their process does nothing more on the key, so that is always the
// most permissive choice). Releases, whatever their outcome, may take effect
// as early as their invocation. Under reentrant a hold runs from the ok of
// its outermost acquire (depth 0 to 1) to the invocation of the release that
// ends it, or may end it: the ok release that takes the depth to 0, or a
// failed, Lost, crashed or pending release at any depth (the earliest point
// at which the hold could have ended); nested acquires and the ok releases
// in between only move the depth. The history is then linearizable iff
//
//   - mutex and reentrant: the certain holds are pairwise disjoint;
//   - semaphore: at most Permits certain holds overlap at any instant;
//   - rwlock: no certain write hold overlaps any other certain hold;
//
// and no release completes ok without a hold. Intervals are closed, as in
// porcupine, so two holds that only touch (one's ok at the same instant as
// the other's release invoke) do not overlap: an overlap needs
// max(starts) < min(ends). A randomized differential test checks these rules
// against the porcupine models below.
//
// The witness of a violation names the holds involved, with the indexes and
// times of their acquires' invokes and oks and of their releases' invokes;
// the window holds their ops plus those of the holds whose acquire or
// release was under way at the violation, which porcupine, run on the window
// alone from a free lock, also finds not linearizable.
//
// Time orders the ops of different processes; a process's own ops are
// ordered as they come in the history even when their times tie. Porcupine
// sees only times, and two ops at the same instant may go either way for it,
// so a process that releases a lock it does not hold and acquires it at the
// same nanosecond is a violation here but not to porcupine. (Knossos orders
// ops by their position in the history instead of by time.)
//
// # Porcupine
//
// Each kind also has a porcupine model. The reentrant model's state is the
// owner and the depth; a failed or Lost release frees the lock if its
// process owns it, at any depth; a crashed or pending release may take one
// level off, free the lock if its process owns it, or do nothing. knossos-mutex is checked only by
// porcupine, within Config.Timeout per key; a check that does not finish is
// unknown, never valid. A Lost release under knossos-mutex frees the lock if
// it is held and does nothing otherwise. When a history is not linearizable,
// the checker
// searches for a short window of it that is not linearizable either: the
// shortest prefix (ops still open at its end may or may not take effect),
// then the latest start (the lock may be in any state at the start, and ops
// already under way at the start may or may not have taken effect). Such a
// window being non-linearizable implies the whole history is.
//
// # Registers
//
// The counter workload records, while its worker holds the lock, a read of
// the counter (an ok read's Value is the integer it returned) and a write of
// that plus one (the write invoke's Value), on their own key; after the run
// the harness records the counter's final value as a nemesis op
// {"f":"counter-final","key":K,"value":{"value":N}} (histories.CounterFinal). A register key is
// checked by two checks, named in KeyResult.Checker ("register",
// "final-value", or "register+final-value"):
//
// register: a read returns the value of the latest write linearized before
// it; the register starts at 0. A failed write had no effect; a write that
// completed as info or is pending may take effect at any time after its
// invocation, or never; a read that did not complete ok says nothing. Cheap
// scans run first, and each finding is a proof:
//
//   - phantom read: an ok read of x != 0 with no write of x invoked by the
//     time it returned;
//   - stale read: an ok read of x invoked after some ok write of another
//     value had returned, when every write of x invoked by the time the read
//     returned (and the initial value, for 0) had returned before that
//     write was invoked. If the reader's next op is an ok write, it
//     overwrote the newer value: the witness says how many increments that
//     lost, at least;
//   - lost update: two ok increments that read the same value, on a key
//     whose every write is an increment (its process's previous op on the
//     key is an ok read of the value minus one): whichever came second
//     overwrote the other's increment. The register alone allows this (both
//     reads may precede both writes), so it is a rule of the counter, not of
//     the register; under a correct lock every acknowledged increment reads
//     the one before, and no two write the same value.
//
// When the scans and the final value find nothing, porcupine checks the
// register, within Config.Timeout (a check that does not finish is unknown,
// never valid); a violation is then explained by the shortest failing
// prefix and the read no order explains. Porcupine sees only times, so at a
// tie between a process's read and its own next write it may order them
// either way: that can only hide a violation, never invent one.
//
// final-value: each ok write wrote its read plus one, so without lost
// updates the final value N lies between the number of ok writes and that
// plus the writes that completed as info or are pending. Fewer means
// acknowledged increments were lost; more, increments no recorded write
// made. A key without a counter-final op skips this check.
//
// The witness lists every finding, earliest first; the window holds the ops
// of the first (a lost update's or a final value's window may be
// linearizable as a register: the harm is the counter's).
//
// # Fencing tokens
//
// CheckTokens checks a lock key's grants against real time, apart from the
// model: an ok acquire's value may carry a fencing token (a number, or an
// object's "token"). When process B's acquire is invoked after process A's
// acquire completed ok, B's token must be greater than A's: whatever drew A's
// token did so before B asked, and a fenced resource refuses any token lower
// than the highest it has seen. Grants without a token, and two grants of one
// process (a re-entrant lock's nested grant repeats its token), are not
// compared; concurrent grants are not ordered by it either.
package models
