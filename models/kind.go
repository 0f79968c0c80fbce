package models

import (
	"fmt"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// Kind names the lock model a history is checked against.
type Kind string

// The lock kinds.
const (
	// Mutex is an owner-aware mutex: one holder at a time.
	Mutex Kind = "mutex"
	// Semaphore is an owner-aware counting semaphore with Config.Permits permits.
	Semaphore Kind = "semaphore"
	// RWLock is an owner-aware read-write lock: one writer or many readers.
	RWLock Kind = "rwlock"
	// Reentrant is an owner-aware re-entrant mutex: one holder at a time,
	// who may acquire it again while holding it (nesting).
	Reentrant Kind = "reentrant"
	// KnossosMutex is Knossos's owner-less mutex, for Jepsen histories.
	KnossosMutex Kind = "knossos-mutex"
)

// Kinds lists every kind, in the order they are documented.
var Kinds = []Kind{Mutex, Semaphore, RWLock, Reentrant, KnossosMutex}

// ParseKind returns the kind named s (case and surrounding blanks ignored).
func ParseKind(s string) (Kind, error) {
	k := Kind(strings.ToLower(strings.TrimSpace(s)))
	for _, known := range Kinds {
		if k == known {
			return k, nil
		}
	}
	names := make([]string, len(Kinds))
	for i, known := range Kinds {
		names[i] = string(known)
	}
	return "", fmt.Errorf("unknown lock kind %q (want one of %s)", s, strings.Join(names, ", "))
}

// DefaultTimeout is the porcupine budget per key when Config.Timeout is 0.
const DefaultTimeout = 60 * time.Second

// Config says how to check a history. A run records it in its config.json
// (harness.Config.Check), so that its history is checked again the same way.
type Config struct {
	// Kind is the lock model of the lock keys (keys with acquire and
	// release ops). Keys with read and write ops are registers whatever
	// the kind.
	Kind Kind `json:"kind"`
	// Permits is the number of permits of a semaphore; 0 means 1. Other kinds
	// ignore it.
	Permits int `json:"permits,omitempty"`
	// Timeout is porcupine's budget per key (knossos-mutex keys and
	// register keys); 0 means DefaultTimeout. After a violation, finding
	// and explaining a short window gets as much again. The holds checker
	// needs no budget.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

func (c Config) normalize() (Config, error) {
	if _, err := ParseKind(string(c.Kind)); err != nil {
		return c, err
	}
	c.Kind, _ = ParseKind(string(c.Kind))
	if c.Permits < 0 {
		return c, fmt.Errorf("permits must not be negative, got %d", c.Permits)
	}
	if c.Permits == 0 {
		c.Permits = 1
	}
	if c.Timeout < 0 {
		return c, fmt.Errorf("timeout must not be negative, got %v", c.Timeout)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c, nil
}

// Verdict is the outcome of a check, and of a test (a run and the check of its
// history), which may also end in Error.
type Verdict string

// The verdicts, from best to worst.
const (
	// Valid: the history is linearizable.
	Valid Verdict = "valid"
	// Unknown: the checker could not decide in time.
	Unknown Verdict = "unknown"
	// Invalid: the history is not linearizable.
	Invalid Verdict = "invalid"
	// Error: the test has no verdict of its history: its run could not start, or
	// broke down, or its history could not be checked. Never a checker's verdict.
	Error Verdict = "error"
)

func (v Verdict) rank() int {
	switch v {
	case Valid:
		return 0
	case Unknown:
		return 1
	case Error:
		return 3
	}
	return 2
}

// Worse returns the worse of two verdicts: error > invalid > unknown > valid. It is
// the one fold of verdicts: a run's checks, an explore session's rounds, a suite's or
// a matrix's runs.
func Worse(a, b Verdict) Verdict {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// Checker names, as in KeyResult.Checker. A register key's Checker names
// the checks that ran on it: CheckerRegister, CheckerFinalValue, or both
// joined by "+" (CheckerRegister + "+" + CheckerFinalValue).
const (
	// CheckerHolds is the structural checker of mutex, semaphore, rwlock
	// and reentrant keys.
	CheckerHolds = "holds"
	// CheckerPorcupine is porcupine alone (knossos-mutex keys).
	CheckerPorcupine = "porcupine"
	// CheckerRegister checks a key's reads and writes against a register
	// (porcupine, after cheap scans for stale reads and lost updates).
	CheckerRegister = "register"
	// CheckerFinalValue compares a counter's final value, recorded by the
	// harness, with its acknowledged increments.
	CheckerFinalValue = "final-value"
)

// KeyResult is the verdict on one key.
type KeyResult struct {
	// Key is the lock (or register) name; "" is the one lock.
	Key string
	// Verdict is the key's verdict.
	Verdict Verdict
	// Checker is "holds" or "porcupine" for a lock key; "register",
	// "final-value" or "register+final-value" for a register key.
	Checker string
	// Ops is the number of history lines (invokes and completions) of the key.
	Ops int
	// Witness explains the violation (or why the verdict is unknown) in
	// words; empty when valid.
	Witness string
	// Window holds the ops of the shortest window found that cannot be
	// linearized, in history order; empty when valid.
	Window []histories.Op
	// FirstViolation is the time (ns) of the violation, -1 if none.
	FirstViolation int64

	// fromZero says that the Window of a register key starts from the
	// register's initial 0 rather than from any value (for
	// WriteVisualization).
	fromZero bool
}

// Result is the verdict on a whole history.
type Result struct {
	// Verdict is the worst verdict over the keys.
	Verdict Verdict
	// Keys holds one result per key, sorted by key.
	Keys []KeyResult
	// Duration is how long the check took.
	Duration time.Duration
}
