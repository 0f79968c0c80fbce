package nemesis

import (
	"testing"
	"time"
)

// TestSetupsAreNamedOnceAndValid: every named setup of the matrix has a name of its
// own, and a schedule of it validates.
func TestSetupsAreNamedOnceAndValid(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Setups() {
		if s.Name == "" || seen[s.Name] {
			t.Errorf("setup %+v: want a name of its own", s)
		}
		seen[s.Name] = true
		sch := Schedule{Classes: s.Classes, Interval: s.Interval, SessionTimeout: time.Second, ServerTargets: s.ServerTargets, ClientTargets: s.ClientTargets, Shapes: s.Shapes}
		if err := sch.Validate(); err != nil {
			t.Errorf("setup %s: %v", s.Name, err)
		}
	}
}
