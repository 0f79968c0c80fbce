package coverage

import (
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// The history's op names this package reads (histories' vocabulary) and the values
// it reads of them.
const (
	fAcquire  = histories.FAcquire
	fRelease  = histories.FRelease
	fRead     = histories.FRead
	fWrite    = histories.FWrite
	fStart    = histories.FStart    // a nemesis fault's start; its value is a histories.Fault
	fStop     = histories.FStop     // the end of the fault last started
	fOrphan   = histories.FOrphan   // the harness's orphan watch saw a blocking orphan
	fLiveness = histories.FLiveness // the final phase's verdict, with the lock node's children
	modeRead  = "read"
	// The lock kinds (models.Kind's names) whose own rows apply.
	kindReentrant = "reentrant"
	kindSemaphore = "semaphore"
	kindRWLock    = "rwlock"
)

// DefaultSessionTimeout is the session timeout assumed when Options gives none (the
// harness's default, harness.DefaultConfig).
const DefaultSessionTimeout = 4 * time.Second

// Options says what the history alone does not.
type Options struct {
	// Kind is the lock model's name (models.Kind): "reentrant", "semaphore" and
	// "rwlock" add their own rows; anything else is a mutex.
	Kind string
	// Permits is a semaphore's number of permits (0: 1).
	Permits int
	// SessionTimeout is the run's session timeout (0: DefaultSessionTimeout).
	SessionTimeout time.Duration
	// NoQueue says the history was made on a lock service whose locks are no
	// queue of nodes (kind.Kind.Queue false: Redis, the databases): rows that speak
	// of what only a queue has (queue nodes, predecessors' watches) are not
	// applicable there, and the long-hold row speaks of a lease. Zero: a queue.
	NoQueue bool
}

// Row is one situation of the table.
type Row struct {
	// ID names the row for programs (explore's feedback); stable across versions.
	ID string `json:"id"`
	// Situation says in plain words what was counted.
	Situation string `json:"situation"`
	// Count is how often the history reached the situation (for RowContention, the
	// largest number seen at once).
	Count int `json:"count"`
	// By splits Count by fault class, or by where it was seen; nil when not split.
	By map[string]int `json:"by,omitempty"`
	// Bugs says which bugs live in this situation.
	Bugs string `json:"bugs"`
	// NotExercised is set when Count is 0 and the situation is one a run must reach
	// to find those bugs: "not exercised: the run could not have found ...".
	NotExercised string `json:"not_exercised,omitempty"`
	// NotApplicable is set when the situation cannot arise with the run's lock
	// service ("not applicable: ..."): Count is then 0 and means nothing, and the
	// row is never flagged not exercised.
	NotApplicable string `json:"not_applicable,omitempty"`
}

// Table is the coverage of one history.
type Table struct {
	// SessionTimeout is the bound of RowLongHold.
	SessionTimeout time.Duration `json:"session_timeout_ns"`
	// Grants counts acquires that completed ok.
	Grants int `json:"grants"`
	// Exercised is false when no acquire, read or write completed ok (an empty
	// history among them): such a history says nothing about the recipe.
	Exercised bool  `json:"exercised"`
	Rows      []Row `json:"rows"`
}

// Row returns the row with the given ID, and whether the table has it.
func (t Table) Row(id string) (Row, bool) {
	for _, r := range t.Rows {
		if r.ID == id {
			return r, true
		}
	}
	return Row{}, false
}

// ApplicableCount is the number of rows that apply to the run's service.
func (t Table) ApplicableCount() int {
	n := 0
	for _, r := range t.Rows {
		if r.NotApplicable == "" {
			n++
		}
	}
	return n
}

// NotExercisedCount is the number of rows flagged not exercised.
func (t Table) NotExercisedCount() int {
	n := 0
	for _, r := range t.Rows {
		if r.NotExercised != "" {
			n++
		}
	}
	return n
}

// NothingExercised says why a history that exercised nothing has no verdict.
const NothingExercised = "the history exercised nothing: no acquire (or read or write) completed ok, so it cannot show any bug; the verdict is unknown"

// Row IDs, in the table's order.
const (
	RowTimedOutQueued   = "timed-out-while-queued"
	RowPredecessorGone  = "predecessor-gave-up"
	RowEdge             = "predecessor-left-at-edge"
	RowAcquireInfo      = "acquire-info"
	RowReleaseInfo      = "release-info"
	RowLost             = "lost-while-holding"
	RowFaultHolding     = "client-fault-holding"
	RowFaultAcquiring   = "client-fault-acquiring"
	RowFaultReleasing   = "client-fault-releasing"
	RowFaultIdle        = "client-fault-idle"
	RowLongHold         = "hold-past-session-timeout"
	RowServerFaultHeld  = "server-fault-while-held"
	RowGrantAfterLoss   = "grant-after-holder-lost"
	RowContention       = "waiters-behind-holder"
	RowNested           = "reentrant-nested"
	RowSemaphoreFull    = "semaphore-full"
	RowReadersTogether  = "readers-together"
	RowOrphans          = "orphan-nodes"
	stateHolding        = "holding"
	stateAcquiring      = "acquiring"
	stateReleasing      = "releasing"
	stateIdle           = "idle"
	orphanByWatch       = "orphan watch"
	orphanByFinalListed = "final phase's listing"
)

// rowSpec is one row of the catalogue: what it counts and which bugs live there.
type rowSpec struct {
	id, situation, bugs string
	// missed completes "not exercised: the run could not have found ..."; empty for a
	// finding, which is not flagged at 0.
	missed string
	// kind, when set, limits the row to that lock kind.
	kind string
	// notOnLease, when set, says why the row does not apply to a lock of another
	// service than ZooKeeper (Redis, a database: no queue of nodes; completing "not
	// applicable: ..."); lease, when set, is the row's situation in such a run's words.
	notOnLease, lease string
}

// catalogue is the table's rows, in order. A row's situation may contain one %s: the
// session timeout.
var catalogue = []rowSpec{
	{id: RowTimedOutQueued, situation: "acquires that timed out while queued behind another (a holder or an earlier waiter)",
		bugs:       "a waiter that gives up must delete its own queue node and only its own: deleting the lowest node (someone else's) breaks mutual exclusion, leaving its own blocks every later waiter",
		missed:     "a timed-out acquire that deletes the wrong node or leaves its own behind",
		notOnLease: "a Redis or database lock has no queue of nodes: a waiter polls one key or row, or waits in the server, and leaves nothing behind when it gives up"},
	{id: RowPredecessorGone, situation: "waiters whose predecessor gave up while they waited",
		bugs:       "an earlier waiter's node vanished without it ever holding: a recipe that takes its predecessor's deletion for a grant overlaps the holder, one that sets no watch when the predecessor vanishes between getChildren and exists waits forever (missed wake-up)",
		missed:     "a waiter that trusts its predecessor's watch, or misses its wake-up",
		notOnLease: "a Redis or database lock has no queue of nodes, so no waiter has a predecessor or a watch"},
	{id: RowEdge, situation: "waiters whose predecessor left within 5ms of their invoke or their give-up (a holder releasing as they queued, the queue moving as they gave up)",
		bugs:       "no fault needed, a round trip's window: a waiter that finds its predecessor already gone and sets no watch waits for a wake-up that never comes (missed wake-up); the watch of an acquire that gave up, fired as the queue moves, re-creates a node nobody waits with",
		missed:     "a missed wake-up or a given-up acquire's late watch (the narrow fault-free races)",
		notOnLease: "a Redis or database lock has no queue of nodes, so no waiter has a predecessor or a watch"},
	{id: RowAcquireInfo, situation: "acquires that ended unknown (info)",
		bugs:   "a create retried blindly after connection loss, a create whose reply was lost: the recipe must find its own node again or it is left as an orphan",
		missed: "a lost or retried create (an orphan lock node)"},
	{id: RowReleaseInfo, situation: "releases that ended unknown (info)",
		bugs:   "a delete whose outcome is unknown: a node left behind blocks the lock until its session ends",
		missed: "a release that leaves its node behind"},
	{id: RowLost, situation: "holders told they lost the lock (lost events while holding)",
		bugs:   "the recipe's lost-lock notice (session expired, connection suspended) was delivered to a holder: a recipe that never reports it, or reports it late, holds on as a zombie",
		missed: "a holder that never (or too late) reports a lost lock"},
	{id: RowFaultHolding, situation: "client faults that landed while their target held the lock",
		bugs:   "a holder paused, cut off or expired: the zombie holder that keeps running after its session ended",
		missed: "a zombie holder (a holder that outlives its session without noticing)"},
	{id: RowFaultAcquiring, situation: "client faults that landed while their target was acquiring",
		bugs:   "a create in flight lost or retried, a waiter cut off while queued: orphan nodes, duplicate nodes, grants to a waiter whose session ended",
		missed: "a create lost or retried mid-acquire"},
	{id: RowFaultReleasing, situation: "client faults in force while their target released (a release sent, or in flight, during the fault)",
		bugs:   "a delete in flight lost: the node left behind blocks the lock, or the release reports success it did not have",
		missed: "a delete lost mid-release"},
	{id: RowFaultIdle, situation: "client faults that landed while their target was idle",
		bugs:   "a session faulted between cycles: stale state carried into the next acquire, cleanup of a stale node at the next acquire",
		missed: "a stale session or node carried into the next acquire"},
	{id: RowLongHold, situation: "holds longer than the session timeout (%s)",
		bugs:   "only a hold that outlives a session timeout can outlive its session while the holder keeps running",
		missed: "a holder whose session expires under it"},
	{id: RowServerFaultHeld, situation: "server faults that started while the lock was held",
		bugs:   "a leader change, partition or paused server under a holder: a follower or observer cut off from the quorum keeps serving a session the leader expired (zombie holder), a grant lost in a leader change",
		missed: "a holder's server failing under it"},
	{id: RowGrantAfterLoss, situation: "grants to another after a holder lost the lock or died",
		bugs:   "the wake-up through a holder's ephemeral node vanishing with its session, and the overlap with a holder that did not know yet",
		missed: "a grant racing a holder whose session ended"},
	{id: RowContention, situation: "most waiters queued at once behind a holder",
		bugs:   "the queue: watches on predecessors, wake-ups in order, herd effects",
		missed: "any bug of the wait queue (nobody ever waited behind a holder)",
		lease:  "most acquires waiting at once while another held the lock"},
	{id: RowNested, situation: "nested acquires (reentrant depth above 1)", kind: kindReentrant,
		bugs:   "a reentrant count that is lost, a nested release that frees the whole lock",
		missed: "a wrong reentrant count"},
	{id: RowSemaphoreFull, situation: "grants that filled the semaphore", kind: kindSemaphore,
		bugs:   "a semaphore that grants one permit too many shows only when it is full",
		missed: "an over-granting semaphore"},
	{id: RowReadersTogether, situation: "read grants while another reader held", kind: kindRWLock,
		bugs:   "readers sharing the lock: a writer let in among readers, readers shut out by each other",
		missed: "a writer admitted among readers"},
	{id: RowOrphans, situation: "orphan lock nodes seen", lease: "orphan locks seen (a key or row whose owner's connection is gone, a session lock kept by a worker that holds nothing)",
		bugs: "a finding, not a situation: a node nobody waits on blocks every waiter (the orphan watch and the final phase's listing)"},
}

// Finding reports whether row id counts findings rather than situations (orphan lock
// nodes): only a bug raises it, so a round cannot aim to cover it, and a session of a
// correct recipe leaves it at 0 for ever.
func Finding(id string) bool { return id == RowOrphans }

// Compute counts the situations of the catalogue in h.
func Compute(h histories.History, opt Options) Table {
	if opt.SessionTimeout <= 0 {
		opt.SessionTimeout = DefaultSessionTimeout
	}
	if opt.Permits <= 0 {
		opt.Permits = 1
	}
	s := scan(h)
	counts := map[string]*Row{}
	t := Table{SessionTimeout: opt.SessionTimeout, Grants: s.grants, Exercised: s.exercised}
	for _, spec := range catalogue {
		if spec.kind != "" && spec.kind != opt.Kind {
			continue
		}
		r := Row{ID: spec.id, Situation: spec.situation, Bugs: spec.bugs}
		if spec.id == RowLongHold {
			r.Situation = fmt.Sprintf(spec.situation, opt.SessionTimeout)
		}
		if opt.NoQueue {
			if spec.lease != "" {
				r.Situation = spec.lease
			}
			if spec.notOnLease != "" {
				r.NotApplicable = "not applicable: " + spec.notOnLease
			}
		}
		t.Rows = append(t.Rows, r)
	}
	for i := range t.Rows {
		counts[t.Rows[i].ID] = &t.Rows[i]
	}
	s.count(counts, opt)
	for i := range t.Rows {
		if t.Rows[i].NotApplicable != "" {
			t.Rows[i].Count, t.Rows[i].By = 0, nil
		}
	}
	t.flag()
	return t
}

// flag sets NotExercised on the applicable rows at 0 that a run must reach to find
// their bugs.
func (t Table) flag() {
	for i, r := range t.Rows {
		t.Rows[i].NotExercised = ""
		for _, spec := range catalogue {
			if spec.id == r.ID && r.Count == 0 && spec.missed != "" && r.NotApplicable == "" {
				t.Rows[i].NotExercised = "not exercised: the run could not have found " + spec.missed
			}
		}
	}
}

// Sum is the coverage of several runs together (explore's session): counts and
// splits added, RowContention the largest, a row present if any table has it, the
// shortest session timeout (a row's situation says the first table's); a row is not
// applicable only when it is in none of the tables that have it.
func Sum(tables ...Table) Table {
	var out Table
	at := map[string]int{}
	for _, t := range tables {
		out.Grants += t.Grants
		out.Exercised = out.Exercised || t.Exercised
		if out.SessionTimeout == 0 || (t.SessionTimeout > 0 && t.SessionTimeout < out.SessionTimeout) {
			out.SessionTimeout = t.SessionTimeout
		}
		for _, r := range t.Rows {
			i, ok := at[r.ID]
			if !ok {
				i, at[r.ID] = len(out.Rows), len(out.Rows)
				out.Rows = append(out.Rows, Row{ID: r.ID, Situation: r.Situation, Bugs: r.Bugs, NotApplicable: r.NotApplicable})
			}
			sum := &out.Rows[i]
			if r.NotApplicable == "" {
				sum.NotApplicable = ""
			}
			if r.ID == RowContention {
				sum.Count = max(sum.Count, r.Count)
				continue
			}
			sum.Count += r.Count
			for k, n := range r.By {
				if sum.By == nil {
					sum.By = map[string]int{}
				}
				sum.By[k] += n
			}
		}
	}
	out.flag()
	return out
}
