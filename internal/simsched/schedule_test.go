package simsched

import "testing"

// kind is a toy simulator's step kind: "tick" (timed, no target), "poke" (a
// client), "jump" (an instance, timed), "crash" (a client, a fault).
type kind string

func (k kind) Target() Target {
	switch k {
	case "tick":
		return NoTarget
	case "jump":
		return OnInstance
	}
	return OnClient
}

func (k kind) Timed() bool   { return k == "tick" || k == "jump" }
func (k kind) IsFault() bool { return k == "crash" || k == "jump" }

func toyKinds() []kind { return []kind{"tick", "poke", "jump", "crash"} }

// TestScheduleText: a schedule reads back as it was written, with or without
// instances; bad headers, steps and targets are errors.
func TestScheduleText(t *testing.T) {
	for _, c := range []struct {
		text      string
		instances bool
	}{
		{"clients 2\ninstances 3\npoke c1\ntick 250ms\njump i2 1s\ncrash c0\n", true},
		{"clients 1\npoke c0\ncrash c0\n", false},
	} {
		s, err := ParseSchedule(c.text, toyKinds(), c.instances)
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		if s.String() != c.text {
			t.Errorf("round trip: %q, want %q", s, c.text)
		}
	}
	if s, err := ParseSchedule("# c\n\nclients 2\n  poke c1 \n", toyKinds(), true); err != nil || s.String() != "clients 2\ninstances 1\npoke c1\n" {
		t.Errorf("instances default: %q, %v", s, err)
	}
	for _, bad := range []string{"", "poke c0", "clients 2\nclients 2", "clients 0", "clients 17", "clients 2\npoke c2",
		"clients 1\npoke", "clients 1\npoke c01", "clients 1\npoke i0", "clients 1\ntick", "clients 1\ntick -1s",
		"clients 1\njump i1 1s", "clients 1\nfly c0", "clients 1\npoke c0\nclients 2", "clients 1\ninstances 2\ninstances 2"} {
		if _, err := ParseSchedule(bad, toyKinds(), true); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ParseSchedule("clients 1\ninstances 2\n", toyKinds(), false); err == nil {
		t.Error("an instances line parsed without instances")
	}
}

// TestActionKeys: one action per kind of client step, and one for every fault.
func TestActionKeys(t *testing.T) {
	keys := ActionKeys(toyKinds())
	if len(keys) != 3 || keys[0].Name != "tick" || keys[1].Name != "poke" || keys[2].Name != "fault" || len(keys[2].Kinds) != 2 {
		t.Errorf("keys %v", keys)
	}
}

// TestProcs: a process that takes a slot's place is named for its number.
func TestProcs(t *testing.T) {
	ps := Procs[*Process[int]]{Slots: make([]*Process[int], 2)}
	for slot := range 2 {
		if ps.Add(slot, NewProcess[int](len(ps.All), slot, false)) {
			t.Errorf("first process of slot %d replaced one", slot)
		}
	}
	p := NewProcess[int](len(ps.All), 1, true)
	if !ps.Add(1, p) || p.Name != "c1#2" || ps.Slots[1] != p {
		t.Errorf("replacing c1: %q", p.Name)
	}
	if can, ok := p.OpStep(OpAcquire); !can || !ok {
		t.Error("an idle process cannot acquire")
	}
	if can, ok := p.OpStep(OpRelease); can || !ok {
		t.Error("an idle process that holds nothing can release")
	}
	if _, ok := p.OpStep("poke"); ok {
		t.Error("poke is an op step")
	}
}
