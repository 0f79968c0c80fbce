package models

import "strings"

// Judged is one check of a run as the run's verdict sees it: a key's checker (Check's
// KeyResult), or a check the run's report adds (the final phase's liveness, whether
// anything was exercised).
type Judged struct {
	// Verdict is the check's own.
	Verdict Verdict
	// Checker names what checked it (KeyResult.Checker; the report's own names).
	Checker string
	// Lock is set for a check of the lock itself: a lock key's model, not a check the
	// report adds.
	Lock bool
	// Bug is set for a lock check whose violation has a cause no fault of the
	// service explains (a recipe bug): it decides the verdict even where data is
	// protected, as fencing kept this run's data safe but the lock itself broke.
	Bug bool
}

// Data reports whether the check is of the data a lock protects (a register key: its
// reads and writes, a counter's final value).
func (j Judged) Data() bool {
	return strings.Contains(j.Checker, CheckerRegister) || strings.Contains(j.Checker, CheckerFinalValue)
}

// Judge returns a run's verdict from its checks, and which of them are advisory: the
// verdict is the worst (Worse) of the others. When a run protects data with its lock
// (a counter key, checked as a register), the lock's own checks are advisory: what
// counts is whether the data stayed right. A fenced counter's lock may well overlap
// (a paused holder) while fencing keeps every write safe; an unfenced one shows the
// harm as lost updates. A lock check that found a recipe bug (Judged.Bug) is never
// advisory.
func Judge(checks []Judged) (Verdict, []bool) {
	data := false
	for _, c := range checks {
		data = data || c.Data()
	}
	v := Valid
	advisory := make([]bool, len(checks))
	for i, c := range checks {
		advisory[i] = data && c.Lock && !c.Data() && !c.Bug
		if !advisory[i] {
			v = Worse(v, c.Verdict)
		}
	}
	return v, advisory
}
