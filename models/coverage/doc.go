// Package coverage owns the coverage table: what a run exercised, counted from its
// history alone (so `zlockcheck check` of a stored run shows the same table as the run
// itself). A lock recipe's bugs live in particular situations; a run that never
// reached a situation could not have found the bugs that live there, whatever its
// verdict. Each row of the table names one situation in plain words, counts how often
// the history reached it, and says which bugs live there; a row at 0 says "not
// exercised".
//
// The rows, and why each is there (the families are those of the mutants in docs/recipes.md
// and of issue 13's broken recipes):
//
//   - acquires that timed out while queued (behind a holder or an earlier waiter): a waiter that gives up must delete its
//     own queue node and only its own (the delete-the-lowest mutant, a timed-out
//     acquire that leaves its node behind and blocks everyone).
//   - waiters whose predecessor gave up: an earlier waiter timed out or failed while
//     they waited; a recipe that trusts its predecessor's watch takes that for a grant
//     (overlap), one that sets no watch when its predecessor vanishes waits forever.
//   - waiters whose predecessor left within 5 ms of their invoke or give-up: the
//     moments of the narrow fault-free races, a round trip wide (a holder releasing
//     between a newcomer's getChildren and its exists: a recipe that sets no watch
//     when its predecessor is already gone waits forever; a waiter giving up just as
//     the queue moves: a watch left armed by the given-up attempt fires between
//     acquires). The predecessor is the latest-invoked acquire of another process
//     still queued (invoke order stands for the nodes' order).
//   - acquires that ended unknown (info): a create retried blindly after connection
//     loss, a create whose reply was lost (the unprotected-create mutant's orphan).
//   - releases that ended unknown (info): a delete that may or may not have happened;
//     a node left behind blocks the lock.
//   - holders told they lost the lock: the recipe's lost-lock notice (session expired,
//     connection suspended) was exercised; a holder that never reports it is a bug only
//     a run with this row above 0 can show.
//   - client faults while the target held / acquired / released / was idle: each
//     client fault (client-pause, client-partition, client-kill, session-expire,
//     reply-loss, ...) counted by where its target stood in its lock cycle when it
//     landed, read from the target's own ops around the fault's start. Holders faulted
//     find zombie holders; acquirers faulted find lost creates and retried creates;
//     releasers faulted find lost deletes; idle workers faulted find stale sessions
//     and cleanup at the next acquire.
//   - holds longer than the session timeout: only a hold that outlives a session
//     timeout can outlive its session while the holder keeps running.
//   - server faults while the lock was held: leader changes, partitions and paused
//     servers under a holder (a follower or observer cut off from the quorum that
//     keeps serving a session the leader expired).
//   - grants after a holder's session ended: a hold ended by a lost or unknown release
//     and the lock then granted to another: the wake-up through an ephemeral node's
//     expiry, and the overlap with a zombie holder.
//   - most waiters queued behind a holder (a maximum, not a count): contention; with
//     none, the queue, the watches and the wake-ups were never used.
//   - nested acquires (reentrant), grants that filled the semaphore (semaphore), read
//     grants while another reader held (rwlock): the part of the model that differs
//     from a mutex.
//   - orphan nodes seen: a finding rather than a situation (the harness's orphan watch
//     and the final phase's listing); at 0 it is not flagged.
//
// A history that exercised nothing (no acquire, read or write completed ok, or no op
// at all) says nothing about the recipe: Table.Exercised is false and the report
// makes its verdict unknown.
//
// The package is pure: it reads a histories.History and knows nothing of ZooKeeper.
package coverage
