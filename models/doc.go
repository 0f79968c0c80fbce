// Package models owns the verdict: it decides whether a lock history (a
// histories.History) could have come from a correct lock of a given kind, and
// explains why not when it could not. It knows nothing of ZooKeeper, workers
// or the harness; it reads ops and nothing else.
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
//   - knossos-mutex: Knossos's owner-less mutex, for Jepsen histories:
//     acquire is legal only when the lock is free, release only when it is
//     held, by anyone.
//
// A history is partitioned by Op.Key and each key is checked on its own; the
// overall verdict is the worst one (invalid > unknown > valid).
//
// # What an op means
//
// Nemesis ops are ignored. Ops whose function is neither acquire nor release
// are paired (so the history's structure is still checked) and then ignored.
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
//     own included, is a violation.
//
// # Structurally bad input
//
// Check returns an error, naming the op's index, for a history it cannot
// interpret: an unknown op type, a completion without an open invoke of its
// process, an invoke while the process already has an open op, a completion
// whose function or key differs from its invoke's, a completion earlier than
// its invoke or an invoke earlier than the process's previous completion, a
// Lost op that is not a release, a rwlock acquire whose mode is neither read
// nor write, and a process used again on a key after one of its ops on that
// key completed as info (the semantics above rely on an info op being its
// process's last on that key).
//
// # The holds checker (mutex, semaphore, rwlock)
//
// Searching for a linearization explodes on long invalid lock histories, so
// these kinds are checked structurally, in O(n log n) time and linear memory.
// The part of a hold that is certain runs from its acquire's ok to its
// release's invoke, or forever if it is never released. Failed acquires are
// dropped, and acquires that completed as info or never completed are free to
// vanish (their process does nothing more on the key, so that is always the
// most permissive choice). Releases, whatever their outcome, may take effect
// as early as their invocation. The history is then linearizable iff
//
//   - mutex: the certain holds are pairwise disjoint;
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
// Each kind also has a porcupine model. knossos-mutex is checked only by
// porcupine, within Config.Timeout per key; a check that does not finish is
// unknown, never valid. A Lost release under knossos-mutex frees the lock if
// it is held and does nothing otherwise. When a history is not linearizable,
// the checker
// searches for a short window of it that is not linearizable either: the
// shortest prefix (ops still open at its end may or may not take effect),
// then the latest start (the lock may be in any state at the start, and ops
// already under way at the start may or may not have taken effect). Such a
// window being non-linearizable implies the whole history is.
package models
