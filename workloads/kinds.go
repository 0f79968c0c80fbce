package workloads

import (
	"fmt"
	"strings"

	"github.com/zlockcheck/zlockcheck/models"
)

// Kind names a workload; it is also the "kind" sent to workers in init.
type Kind string

// The lock workloads. Four are the lock models' own kinds, by the same names (the
// model is what checks them); the counter is a mutex with data behind it.
const (
	Mutex     = Kind(models.Mutex)
	Semaphore = Kind(models.Semaphore)
	RWLock    = Kind(models.RWLock)
	Reentrant = Kind(models.Reentrant)
	// Counter: a mutex whose holder reads a counter znode and writes it back plus one.
	Counter Kind = "counter"
)

// CounterKey is the history key of the counter workload's reads and writes.
const CounterKey = "counter"

// kindSpec is everything that differs between workload kinds outside the cycle itself
// (Cycle owns that): the catalogue below is the one place a new kind is added.
type kindSpec struct {
	kind Kind
	// model checks the lock key's ops (the counter key is a register whatever it is).
	model models.Kind
	// permits is the default number of permits.
	permits int
	// queues: waiters queue behind the lowest child of the lock node, so a lowest
	// node nobody will delete blocks everyone (the harness's orphan watch). The
	// semaphore's nodes live in recipe-specific layouts.
	queues bool
	// counter: the critical section reads and writes the counter znode.
	counter bool
	// finalMode is the mode of the final phase's acquire (rwlock: write, so that
	// every worker must get the whole lock).
	finalMode string
}

// catalogue lists every workload kind, in the order they are documented.
func catalogue() []kindSpec {
	return []kindSpec{
		{kind: Mutex, model: models.Mutex, permits: 1, queues: true},
		{kind: Semaphore, model: models.Semaphore, permits: 2},
		{kind: RWLock, model: models.RWLock, permits: 1, queues: true, finalMode: "write"},
		{kind: Reentrant, model: models.Reentrant, permits: 1, queues: true},
		{kind: Counter, model: models.Mutex, permits: 1, queues: true, counter: true},
	}
}

// Kinds lists every workload.
func Kinds() []Kind {
	var out []Kind
	for _, s := range catalogue() {
		out = append(out, s.kind)
	}
	return out
}

// ParseKind checks a workload name.
func ParseKind(s string) (Kind, error) {
	if _, ok := Kind(s).spec(); ok {
		return Kind(s), nil
	}
	var names []string
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("unknown workload %q (want %s)", s, strings.Join(names, ", "))
}

func (k Kind) spec() (kindSpec, bool) {
	for _, s := range catalogue() {
		if s.kind == k {
			return s, true
		}
	}
	return kindSpec{}, false
}

// Model is the lock model that checks this workload's lock key.
func (k Kind) Model() models.Kind { s, _ := k.spec(); return s.model }

// DefaultPermits is the number of permits the workload has unless told otherwise.
func (k Kind) DefaultPermits() int { s, _ := k.spec(); return max(1, s.permits) }

// QueuesBehindLowest reports whether waiters queue behind the lowest child of the
// lock node, so that the harness can tell a blocking orphan node.
func (k Kind) QueuesBehindLowest() bool { s, _ := k.spec(); return s.queues }

// HasCounter reports whether the critical section reads and writes the counter znode.
func (k Kind) HasCounter() bool { s, _ := k.spec(); return s.counter }
