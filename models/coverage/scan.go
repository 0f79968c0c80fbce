package coverage

import (
	"encoding/json"
	"math"
	"sort"

	"github.com/zlockcheck/zlockcheck/histories"
)

// forever is the end of a hold or call still open when the history ends.
const forever = math.MaxInt64

// call is one client operation: an invoke and its completion.
type call struct {
	proc       int
	key, f     string
	read       bool  // a read-mode acquire
	start, end int64 // end is forever while pending
	out        histories.Type
	lost       bool
	nested     bool // an acquire by a process that already held the key
}

// hold is one certain hold of a lock key: from its acquire's ok to the invoke of the
// release that ended it (forever when none did).
type hold struct {
	proc       int
	key        string
	read       bool
	start, end int64
	// ended says how: by a lost release or one whose outcome is unknown ("lost",
	// "info"), or another way ("").
	ended string
	// released is when the release that ended it completed (forever when none did).
	released int64
}

// grant is an acquire's ok.
type grant struct {
	proc int
	t    int64
}

// fault is a nemesis fault's start.
type fault struct {
	class string
	t     int64
	// end is when its stop was recorded (t when none was: it counts as an instant).
	end int64
	// target is the client process it aimed at; -1 for a server fault.
	target int
	// observer: a partition that cut off a ZooKeeper observer (its record's
	// cut_off_role).
	observer bool
}

// scanned is a history taken apart for counting.
type scanned struct {
	calls []call
	holds []hold
	// procCalls and procHolds index calls and holds by process.
	procCalls  map[int][]int
	procHolds  map[int][]int
	faults     []fault
	openFault  int // the fault last started while its stop is not yet seen; -1: none
	orphanOps  int
	orphanList int
	lastT      int64
	grants     int
	exercised  bool
}

// scan pairs the client ops of h into calls, derives the holds and collects the
// nemesis's faults and orphan reports. Ops that do not pair (a history the models
// would reject) are skipped.
func scan(h histories.History) scanned {
	s := scanned{procCalls: map[int][]int{}, procHolds: map[int][]int{}, openFault: -1}
	open := map[int]int{} // process -> its open call
	for _, op := range h {
		s.lastT = max(s.lastT, op.Time)
		if op.Process.Nemesis {
			s.nemesis(op)
			continue
		}
		p := op.Process.ID
		if op.Type == histories.Invoke {
			open[p] = len(s.calls)
			s.procCalls[p] = append(s.procCalls[p], len(s.calls))
			s.calls = append(s.calls, call{proc: p, key: op.Key, f: op.F, read: op.Mode == modeRead, start: op.Time, end: forever, lost: op.Lost})
			continue
		}
		i, ok := open[p]
		if !ok || s.calls[i].f != op.F {
			continue
		}
		delete(open, p)
		c := &s.calls[i]
		c.end, c.out, c.lost = op.Time, op.Type, c.lost || op.Lost
		if op.Type == histories.OK && (op.F == fAcquire || op.F == fRead || op.F == fWrite) {
			s.exercised = true
		}
	}
	s.deriveHolds()
	return s
}

// nemesis takes in one nemesis op.
func (s *scanned) nemesis(op histories.Op) {
	switch op.F {
	case fStart:
		var v struct {
			Fault      string `json:"fault"`
			Process    *int   `json:"process"`
			Error      string `json:"error"`
			CutOffRole string `json:"cut_off_role"`
		}
		if json.Unmarshal(op.Value, &v) != nil || v.Fault == "" || v.Error != "" {
			return // not a fault, or one that was never applied
		}
		f := fault{class: v.Fault, t: op.Time, end: op.Time, target: -1, observer: v.CutOffRole == "observer"}
		if v.Process != nil {
			f.target = *v.Process
		}
		s.faults = append(s.faults, f)
		s.openFault = len(s.faults) - 1
	case fStop:
		// The nemesis runs one fault at a time: a stop ends the fault last started.
		if i := s.openFault; i >= 0 && i < len(s.faults) {
			s.faults[i].end = op.Time
			s.openFault = -1
		}
	case fOrphan:
		var v struct {
			MissedWakeup bool `json:"missed_wakeup"`
		}
		if json.Unmarshal(op.Value, &v) == nil && !v.MissedWakeup {
			s.orphanOps++ // a missed wake-up's node is its waiter's, no orphan
		}
	case fLiveness:
		var v struct {
			Children []struct {
				Orphan bool `json:"orphan"`
			} `json:"children"`
		}
		if json.Unmarshal(op.Value, &v) == nil {
			for _, c := range v.Children {
				if c.Orphan {
					s.orphanList++
				}
			}
		}
	}
}

// deriveHolds turns the lock calls into holds, in each process's own order. A nested
// ok acquire (the process already holds the key) deepens the hold; a release that
// completed ok at depth above 1 only undoes one level; any other release ends the hold
// at its invoke.
func (s *scanned) deriveHolds() {
	type pk struct {
		proc int
		key  string
	}
	depth := map[pk]int{}
	at := map[pk]int{} // the open hold
	for i := range s.calls {
		c := &s.calls[i]
		k := pk{c.proc, c.key}
		switch {
		case c.f == fAcquire && c.out == histories.OK:
			s.grants++
			if depth[k] > 0 {
				depth[k]++
				c.nested = true
				break
			}
			depth[k], at[k] = 1, len(s.holds)
			s.procHolds[c.proc] = append(s.procHolds[c.proc], len(s.holds))
			s.holds = append(s.holds, hold{proc: c.proc, key: c.key, read: c.read, start: c.end, end: forever, released: forever})
		case c.f == fAcquire && depth[k] > 0:
			c.nested = true
		case c.f == fRelease && depth[k] > 0:
			if c.out == histories.OK && !c.lost && depth[k] > 1 {
				depth[k]--
				break
			}
			hd := &s.holds[at[k]]
			hd.end, hd.released = c.start, c.end
			switch {
			case c.lost:
				hd.ended = "lost"
			case c.out == histories.Info:
				hd.ended = "info"
			}
			depth[k] = 0
		}
	}
}

// spans counts intervals [start, end) that cover a moment or meet a window.
type spans struct{ starts, ends []int64 }

func newSpans(n int) *spans {
	return &spans{starts: make([]int64, 0, n), ends: make([]int64, 0, n)}
}

func (s *spans) add(start, end int64) {
	s.starts = append(s.starts, start)
	s.ends = append(s.ends, end)
}

func (s *spans) sort() {
	sort.Slice(s.starts, func(i, j int) bool { return s.starts[i] < s.starts[j] })
	sort.Slice(s.ends, func(i, j int) bool { return s.ends[i] < s.ends[j] })
}

// upTo is the number of sorted values <= t.
func upTo(sorted []int64, t int64) int {
	return sort.Search(len(sorted), func(i int) bool { return sorted[i] > t })
}

// below is the number of sorted values < t.
func below(sorted []int64, t int64) int {
	return sort.Search(len(sorted), func(i int) bool { return sorted[i] >= t })
}

// covering is the number of spans with start <= t < end.
func (s *spans) covering(t int64) int {
	if s == nil {
		return 0
	}
	return upTo(s.starts, t) - upTo(s.ends, t)
}

// meeting is the number of spans with start < b and end > a, for a < b. (A span that
// ends by a starts before b, so only those are taken away.)
func (s *spans) meeting(a, b int64) int {
	if s == nil || a >= b {
		return 0
	}
	return below(s.starts, b) - upTo(s.ends, a)
}
