package redis

import (
	"errors"
	"fmt"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// TestFailoverWatchTurnsViewsIntoFailovers feeds the watch the views three sentinels
// give of a failover, its abort and a switch seen with no start, and checks the
// records it makes (no server: the views are written by hand).
func TestFailoverWatchTurnsViewsIntoFailovers(t *testing.T) {
	const s1, s2, s3 = "10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"
	// Each primary is named in its own epoch: s1 in the first, s2 after one
	// failover, s3 after two.
	epoch := map[string]int64{s1: 0, s2: 1, s3: 2}
	view := func(sentinel int, primary string, leading bool) sentinelView {
		return sentinelView{sentinel: sentinel, primary: primary, epoch: epoch[primary], inProgress: leading}
	}
	start := func(primary string) string { return "start " + primary }
	stop := func(primary, promoted string) string { return fmt.Sprintf("stop %s -> %s", primary, promoted) }
	for _, tc := range []struct {
		name  string
		views []sentinelView
		want  []string
	}{
		{"quiet", []sentinelView{view(1, s1, false), view(2, s1, false), view(3, s1, false)}, nil},
		{"a failover led by sentinel 2, then seen by sentinel 1",
			[]sentinelView{view(1, s1, false), view(2, s1, true), view(2, s1, true), view(3, s1, false), view(1, s2, false), view(2, s2, false), view(3, s2, false)},
			[]string{start("s1"), stop("s1", "s2")}},
		{"a sentinel out of reach is no answer",
			[]sentinelView{view(2, s1, true), {sentinel: 1, err: errors.New("i/o timeout")}, view(3, s1, false), view(2, s3, false)},
			[]string{start("s1"), stop("s1", "s3")}},
		{"a switch with no start seen",
			[]sentinelView{view(1, s1, false), view(3, s2, false), view(1, s2, false)},
			[]string{start("s1"), stop("s1", "s2")}},
		{"a sentinel that has not heard yet names the old primary",
			[]sentinelView{view(1, s1, true), view(1, s2, false), view(2, s1, false), view(3, s1, false), view(2, s2, false)},
			[]string{start("s1"), stop("s1", "s2")}},
		{"the leader takes the new epoch before it names the promoted replica",
			[]sentinelView{view(1, s1, true), {sentinel: 1, primary: s1, epoch: 1, inProgress: true}, view(2, s2, false)},
			[]string{start("s1"), stop("s1", "s2")}},
		{"given up: every sentinel answers, none leads",
			[]sentinelView{view(1, s1, true), view(2, s1, false), view(3, s1, false), view(1, s1, false)},
			[]string{start("s1"), "stop s1 aborted"}},
		{"not given up while the leader still leads",
			[]sentinelView{view(1, s1, true), view(2, s1, false), view(3, s1, false), view(1, s1, true), view(2, s1, false)},
			[]string{start("s1")}},
		{"two failovers in a row",
			[]sentinelView{view(1, s1, true), view(1, s2, false), view(3, s2, true), view(2, s3, false)},
			[]string{start("s1"), stop("s1", "s2"), start("s2"), stop("s2", "s3")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &failoverWatch{names: map[string]string{s1: "s1", s2: "s2", s3: "s3"}, sentinels: 3, primary: s1, persistence: "none"}
			var got []string
			for _, v := range tc.views {
				for _, f := range w.observe(v) {
					if f.By != "sentinel" || f.Persistence != "none" {
						t.Errorf("record %+v: want by sentinel, persistence none", f)
					}
					got = append(got, describe(f))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("records %q, want %q", got, tc.want)
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
	}
	return fmt.Sprintf("stop %s -> %s", f.Primary, f.Promoted)
}
