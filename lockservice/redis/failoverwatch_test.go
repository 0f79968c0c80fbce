package redis

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// TestFailoverWatchTurnsViewsIntoFailovers feeds the watch what three sentinels and
// three instances say through failovers, a primary restarted empty, a failover given
// up and a sentinel out of reach, and checks the records it makes (no server: the
// views are written by hand).
func TestFailoverWatchTurnsViewsIntoFailovers(t *testing.T) {
	const s1, s2, s3 = "10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"
	// Each primary is named in its own epoch: s1 in the first, s2 after one
	// failover, s3 after two.
	epoch := map[string]int64{s1: 0, s2: 1, s3: 2}
	type view struct {
		sentinel *sentinelView
		role     *roleView
	}
	sent := func(sentinel int, primary string, leading bool) view {
		return view{sentinel: &sentinelView{sentinel: sentinel, primary: primary, epoch: epoch[primary], inProgress: leading}}
	}
	role := func(addr string, primary bool) view { return view{role: &roleView{addr: addr, primary: primary}} }
	settledOn := func(primary string) []view {
		return []view{sent(1, primary, false), sent(2, primary, false), sent(3, primary, false)}
	}
	seq := func(parts ...[]view) []view {
		var out []view
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	one := func(v ...view) []view { return v }
	for _, tc := range []struct {
		name  string
		views []view
		want  string
	}{
		{"quiet", one(role(s1, true), role(s2, false), role(s3, false)), ""},
		{"the primary killed, sentinel 2 leads, s2 promoted",
			one(role(s1, false), sent(2, s1, true), sent(2, s1, true), sent(1, s2, false), role(s2, true), sent(3, s2, false), sent(2, s2, false)),
			"start s1 | stop s1 -> s2 [s2]"},
		{"a sentinel out of reach is no answer",
			one(sent(2, s1, true), view{sentinel: &sentinelView{sentinel: 1, err: errors.New("i/o timeout")}}, sent(3, s3, false), sent(2, s3, false), role(s3, true), role(s1, false)),
			"start s1 | stop s1 -> s3 [s1 s3]"},
		{"a sentinel that has not heard names the old primary: still in force",
			one(role(s1, false), sent(1, s2, false), role(s2, true), sent(2, s1, false), sent(3, s2, false), sent(2, s2, false)),
			"start s1 | stop s1 -> s2 [s2]"},
		{"the leader takes the new epoch before it names the promoted replica",
			one(sent(1, s1, true), view{sentinel: &sentinelView{sentinel: 1, primary: s1, epoch: 1, inProgress: true}}, role(s1, false), role(s2, true), sent(2, s2, false), sent(3, s2, false), sent(1, s2, false)),
			"start s1 | stop s1 -> s2 [s1 s2]"},
		{"the old primary restarted empty serves beside the new one until converted",
			seq(one(role(s1, false), sent(1, s1, true), role(s2, true)), settledOn(s2), one(role(s1, true), role(s1, true), role(s1, false))),
			"start s1 | stop s1 -> s2 [s2] | start s2 | stop s2 [s1 s2]"},
		{"given up: none leads any more, the primary the same",
			one(sent(1, s1, true), sent(2, s1, false), sent(1, s1, false)),
			"start s1 | stop s1 aborted"},
		{"the primary restarted before the sentinels acted: given up",
			one(role(s1, false), role(s1, true)),
			"start s1 | stop s1 aborted"},
		{"two failovers in a row",
			seq(one(sent(1, s1, true), role(s1, false), role(s2, true)), settledOn(s2), one(sent(3, s2, true), role(s2, false), role(s3, true)), settledOn(s3)),
			"start s1 | stop s1 -> s2 [s1 s2] | start s2 | stop s2 -> s3 [s2 s3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSentinelWatch(map[string]string{s1: "s1", s2: "s2", s3: "s3"}, "none", s1)
			var got []string
			for _, v := range append(settledOn(s1), tc.views...) {
				var fs []lockservice.Failover
				if v.sentinel != nil {
					fs = w.sentinel(*v.sentinel)
				} else {
					fs = w.role(*v.role)
				}
				for _, f := range fs {
					if f.By != "sentinel" || f.Persistence != "none" {
						t.Errorf("record %+v: want by sentinel, persistence none", f)
					}
					got = append(got, describe(f))
				}
			}
			if s := strings.Join(got, " | "); s != tc.want {
				t.Errorf("records\n %s\nwant\n %s", s, tc.want)
			}
		})
	}
}

func describe(f lockservice.Failover) string {
	switch {
	case !f.Stop:
		return "start " + f.Primary
	case f.Aborted:
		return "stop " + f.Primary + " aborted"
	case f.Promoted == "":
		return fmt.Sprintf("stop %s %v", f.Primary, f.Primaries)
	}
	return fmt.Sprintf("stop %s -> %s %v", f.Primary, f.Promoted, f.Primaries)
}
