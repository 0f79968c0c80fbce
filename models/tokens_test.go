package models

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/zlockcheck/zlockcheck/histories"
	"pgregory.net/rapid"
)

// grantOps are process p's acquire invoked at inv and granted at ok with token
// (none when token < 0), as {"token": N} when obj is set.
func grantOps(p int, inv, ok, token int64, obj bool) []histories.Op {
	o := histories.Op{Type: histories.OK, F: histories.FAcquire, Process: histories.Client(p), Time: ok, Key: "l"}
	switch {
	case token >= 0 && obj:
		o.Value = json.RawMessage(`{"token":` + strconv.FormatInt(token, 10) + `}`)
	case token >= 0:
		o.Value = json.RawMessage(strconv.FormatInt(token, 10))
	}
	return []histories.Op{{Type: histories.Invoke, F: histories.FAcquire, Process: histories.Client(p), Time: inv, Key: "l"}, o}
}

func tokenHistory(grants ...[]histories.Op) histories.History {
	var h histories.History
	for _, g := range grants {
		h = append(h, g...)
	}
	for i := range h {
		h[i].Index = int64(i)
	}
	return h
}

// TestCheckTokens: a later grant (invoked after an earlier one completed) must carry a
// greater token; concurrent grants, one process's grants and grants without a token
// are not compared.
func TestCheckTokens(t *testing.T) {
	cases := []struct {
		name string
		h    histories.History
		bad  bool
	}{
		{"growing", tokenHistory(grantOps(1, 0, 10, 5, true), grantOps(2, 20, 30, 6, true), grantOps(3, 40, 50, 9, false)), false},
		{"reused", tokenHistory(grantOps(1, 0, 10, 5, true), grantOps(2, 20, 30, 5, true)), true},
		{"lower", tokenHistory(grantOps(1, 0, 10, 5, false), grantOps(2, 20, 30, 4, false)), true},
		{"lower than an earlier one, not the last", tokenHistory(grantOps(1, 0, 10, 9, true), grantOps(2, 20, 30, 10, true), grantOps(3, 40, 50, 9, true)), true},
		{"concurrent: invoked before the other completed", tokenHistory(grantOps(1, 0, 10, 5, true), grantOps(2, 5, 30, 4, true)), false},
		{"one process (nested)", tokenHistory(grantOps(1, 0, 10, 5, true), grantOps(1, 20, 30, 5, true)), false},
		{"own grant is highest, another's lower one still counts", tokenHistory(grantOps(2, 0, 5, 7, true), grantOps(1, 6, 10, 9, true), grantOps(1, 20, 30, 7, true)), true},
		{"no tokens", tokenHistory(grantOps(1, 0, 10, -1, true), grantOps(2, 20, 30, -1, true)), false},
	}
	for _, c := range cases {
		v, bad := CheckTokens(c.h, "l")
		if bad != c.bad {
			t.Errorf("%s: violation %v (%+v), want %v", c.name, bad, v, c.bad)
		}
		if bad && (v.LaterToken > v.EarlierToken || v.Later.Time <= v.Earlier.Time || v.Witness() == "") {
			t.Errorf("%s: a violation that is none: %+v", c.name, v)
		}
	}
}

// TestCheckTokensProperty: grants drawn from one counter in the order the server made
// them, each completing before the next is asked for or overlapping it at random,
// never break the rule; the same history with one later grant's token set back to an
// earlier, completed grant's always does.
func TestCheckTokensProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 30).Draw(t, "grants")
		var gs [][]histories.Op
		var at, token int64
		for i := 0; i < n; i++ {
			inv := at + rapid.Int64Range(0, 5).Draw(t, "gap")
			token += rapid.Int64Range(1, 3).Draw(t, "step")
			ok := inv + rapid.Int64Range(1, 5).Draw(t, "wait")
			gs = append(gs, grantOps(i%4, inv, ok, token, true))
			at = ok
		}
		h := tokenHistory(gs...)
		if v, bad := CheckTokens(h, "l"); bad {
			t.Fatalf("a counter's tokens flagged: %s", v.Witness())
		}
		// Process 99 asks after the last grant completed and gets the first token again.
		first, _ := tokenOf(gs[0][1].Value)
		h = tokenHistory(append(gs, grantOps(99, at+1, at+2, first, true))...)
		if _, bad := CheckTokens(h, "l"); !bad {
			t.Fatal("a reused token passed")
		}
	})
}
