package report

import (
	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
)

// tokensKeyPrefix names a lock key's fencing-token check: "tokens:<key>".
const tokensKeyPrefix = "tokens:"

// TokenChecks are the fencing-token checks of an exclusive lock's keys (mutex,
// reentrant) whose grants carry tokens (models.CheckTokens): one per such key, valid
// or invalid with its witness and cause (cause.ClassifyTokens). A key without tokens
// has no check: it would have checked nothing.
func TokenChecks(h histories.History, res models.Result, kind models.Kind) []Check {
	if kind != models.Mutex && kind != models.Reentrant {
		return nil
	}
	var out []Check
	for _, k := range res.Keys {
		n := models.CountTokens(h, k.Key)
		if n == 0 {
			continue
		}
		c := Check{Key: tokensKeyPrefix + k.Key, Verdict: models.Valid, Checker: "fencing tokens", Ops: n}
		if v, bad := models.CheckTokens(h, k.Key); bad {
			c.Verdict, c.Witness = models.Invalid, v.Witness()
			s := float64(v.Later.Time) / 1e9
			c.FirstViolationSeconds = &s
			f := cause.ClassifyTokens(h, v.Earlier, v.Later)
			c.Cause = &f
		}
		out = append(out, c)
	}
	return out
}
