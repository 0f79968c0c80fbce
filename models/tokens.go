package models

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/zlockcheck/zlockcheck/histories"
)

// TokenViolation is a grant whose fencing token does not exceed the token of a grant
// that completed before it was asked for (see CheckTokens).
type TokenViolation struct {
	// Earlier and Later are the two ok acquires: Later was invoked after Earlier
	// completed, by another process.
	Earlier, Later histories.Op
	// EarlierToken and LaterToken are their tokens (LaterToken <= EarlierToken).
	EarlierToken, LaterToken int64
}

// Witness says what went wrong, for a person.
func (v TokenViolation) Witness() string {
	return fmt.Sprintf("process %d was granted %q with fencing token %d at %s (index %d), after process %d's grant with token %d had completed at %s (index %d): a token must grow with every grant that follows another, or a resource that fences by token takes the earlier holder's writes after the later one's",
		v.Later.Process.ID, v.Later.Key, v.LaterToken, seconds(v.Later.Time), v.Later.Index,
		v.Earlier.Process.ID, v.EarlierToken, seconds(v.Earlier.Time), v.Earlier.Index)
}

func seconds(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

// CheckTokens checks the fencing tokens of key's grants against real time: when
// process B's acquire is invoked after process A's acquire completed ok, B's token
// must be greater than A's, for whatever drew A's token had done so before B asked.
// That is what a fenced resource relies on (it keeps the highest token it has seen
// and refuses lower ones). A grant's token is its ok acquire's value, a number or
// {"token": N}; grants without one, and pairs of one process (a re-entrant lock's
// nested grant repeats its token), are not compared. ok is true when some grant
// breaks the rule; the violation returned is the first by the later grant's
// invocation. A history without tokens passes.
func CheckTokens(h histories.History, key string) (TokenViolation, bool) {
	type grant struct {
		invoke, ok histories.Op
		token      int64
	}
	var grants []grant
	invoked := map[int]histories.Op{} // by process: its acquire in flight
	for _, op := range h {
		if op.Process.Nemesis || op.Key != key || op.F != histories.FAcquire {
			continue
		}
		switch op.Type {
		case histories.Invoke:
			invoked[op.Process.ID] = op
		case histories.OK:
			if inv, ok := invoked[op.Process.ID]; ok {
				if t, ok := tokenOf(op.Value); ok {
					grants = append(grants, grant{invoke: inv, ok: op, token: t})
				}
			}
			delete(invoked, op.Process.ID)
		default:
			delete(invoked, op.Process.ID)
		}
	}
	byOK := append([]grant(nil), grants...)
	sort.SliceStable(byOK, func(i, j int) bool { return byOK[i].ok.Time < byOK[j].ok.Time })
	sort.SliceStable(grants, func(i, j int) bool { return grants[i].invoke.Time < grants[j].invoke.Time })
	// best and second are the completed grants with the highest tokens, of two
	// different processes, among those that completed before the current invoke.
	var best, second *grant
	next := 0
	for i := range grants {
		b := &grants[i]
		for ; next < len(byOK) && byOK[next].ok.Time < b.invoke.Time; next++ {
			g := &byOK[next]
			switch {
			case best == nil || g.token > best.token:
				if best != nil && best.ok.Process.ID != g.ok.Process.ID {
					second = best
				}
				best = g
			case g.ok.Process.ID != best.ok.Process.ID && (second == nil || g.token > second.token):
				second = g
			}
		}
		a := best
		if a != nil && a.ok.Process.ID == b.ok.Process.ID {
			a = second
		}
		if a != nil && b.token <= a.token {
			return TokenViolation{Earlier: a.ok, Later: b.ok, EarlierToken: a.token, LaterToken: b.token}, true
		}
	}
	return TokenViolation{}, false
}

// tokenOf reads a grant's fencing token: a JSON number, or an object's "token".
func tokenOf(v json.RawMessage) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	if json.Unmarshal(v, &n) == nil {
		return n, true
	}
	var obj struct {
		Token *int64 `json:"token"`
	}
	if json.Unmarshal(v, &obj) == nil && obj.Token != nil {
		return *obj.Token, true
	}
	return 0, false
}

// CountTokens is how many of key's ok acquires carry a fencing token.
func CountTokens(h histories.History, key string) int {
	n := 0
	for _, op := range h {
		if !op.Process.Nemesis && op.Key == key && op.F == histories.FAcquire && op.Type == histories.OK {
			if _, ok := tokenOf(op.Value); ok {
				n++
			}
		}
	}
	return n
}
