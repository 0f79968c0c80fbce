package recipes

import "testing"

func TestSequenceOf(t *testing.T) {
	for _, c := range []struct {
		name string
		seq  int64
		ok   bool
	}{
		{"_c_0f3e-lock-0000000042", 42, true},
		{"lock-0000000000", 0, true},
		{"lock-42", 0, false},
		{"lock-", 0, false},
		{"x12345678901", 0, false}, // eleven digits: not a sequence suffix
		{"x2345678901", 2345678901, true},
	} {
		seq, ok := sequenceOf(c.name)
		if seq != c.seq || ok != c.ok {
			t.Errorf("sequenceOf(%q) = %d, %v; want %d, %v", c.name, seq, ok, c.seq, c.ok)
		}
	}
}
