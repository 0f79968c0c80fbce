// Package plots draws the pictures of a run directory from its history: latency.png,
// the latency of every completed op over time, and rate.png, completions per second by
// function and outcome. Both shade the nemesis's faults, labelled, and mark with a red
// line where a check found its first violation. It also pairs the nemesis's start and
// stop ops into faults (Faults), which the HTML timeline shades too.
package plots

import (
	"encoding/json"

	"github.com/zlockcheck/zlockcheck/histories"
)

// Fault is one fault of the nemesis, from its start op to the stop op that ends it.
type Fault struct {
	// Name is the fault's class, the "fault" of the ops' value (e.g. "partition").
	Name string `json:"name"`
	// Label names the fault on pictures: its class, then its shape or target if any.
	Label string `json:"label"`
	// Start and Stop are seconds since the run started. Stop is the end of the
	// history when the fault was never stopped.
	Start float64 `json:"start"`
	Stop  float64 `json:"stop"`
	// Stopped is false for a fault that the history never records stopping.
	Stopped bool `json:"stopped"`
	// StartIndex and StopIndex are the history indexes of the start and stop ops;
	// StopIndex is -1 when the fault was never stopped.
	StartIndex int64 `json:"start_index"`
	StopIndex  int64 `json:"stop_index"`
	// Error is what the start or stop op reported going wrong, if anything.
	Error string `json:"error,omitempty"`
}

// End returns the time of h's last op in seconds since the run started (0 for an
// empty history).
func End(h histories.History) float64 {
	var end int64
	for _, op := range h {
		end = max(end, op.Time)
	}
	return float64(end) / 1e9
}

// Faults pairs the nemesis's start and stop ops of h by fault class: a stop ends the
// earliest start of its class that is still open. A start never stopped lasts until
// the end of the history. Faults are returned in the order they started.
func Faults(h histories.History) []Fault {
	end := End(h)
	var faults []Fault
	open := map[string][]int{} // class -> positions in faults, oldest first
	for _, op := range h {
		if !op.Process.Nemesis || (op.F != histories.FStart && op.F != histories.FStop) {
			continue
		}
		v := faultValue(op.Value)
		t := float64(op.Time) / 1e9
		if op.F == histories.FStart {
			label := v.name
			if v.detail != "" {
				label += " " + v.detail
			}
			open[v.name] = append(open[v.name], len(faults))
			faults = append(faults, Fault{Name: v.name, Label: label, Start: t, Stop: end,
				StartIndex: op.Index, StopIndex: -1, Error: v.err})
			continue
		}
		q := open[v.name]
		if len(q) == 0 {
			continue // a stop without a start: nothing to shade
		}
		f := &faults[q[0]]
		open[v.name] = q[1:]
		f.Stop, f.Stopped, f.StopIndex = max(t, f.Start), true, op.Index
		if f.Error == "" {
			f.Error = v.err
		}
	}
	for i := range faults {
		if !faults[i].Stopped {
			faults[i].Label += " (never stopped)"
		}
	}
	return faults
}

type faultFields struct {
	name, detail, err string
}

// faultValue reads the class, shape or target, and error of a nemesis op's value
// (histories.Fault), leniently: a value that is not an object is a fault named "fault".
func faultValue(raw json.RawMessage) faultFields {
	var f histories.Fault
	_ = json.Unmarshal(raw, &f) // lenient: what cannot be read is left empty
	v := faultFields{name: f.Class, detail: f.DetailString("shape"), err: f.Error}
	if v.name == "" {
		v.name = "fault"
	}
	if v.detail == "" {
		v.detail = f.DetailString("target")
	}
	return v
}
