package report

import (
	"fmt"
	"html"
	"io"
	"sort"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
)

// bar is one completed (or never completed) client op on the timeline.
type bar struct {
	process       int
	start, end    int64
	f, typ, label string
	inWindow      bool
}

// WriteTimeline renders the history as an HTML page: one lane per process, each op a
// bar from its invocation to its completion coloured by outcome (ok green, fail grey,
// info orange, never completed red-dashed), ops of a violation's window outlined red.
func WriteTimeline(w io.Writer, h histories.History, res models.Result) error {
	window := map[int64]bool{}
	for _, k := range res.Keys {
		for _, op := range k.Window {
			window[op.Index] = true
		}
	}
	var end int64 = 1
	for _, op := range h {
		end = max(end, op.Time)
	}
	open := map[int]histories.Op{}
	var bars []bar
	lanes := map[int]bool{}
	for _, op := range h {
		if op.Process.Nemesis {
			continue
		}
		p := op.Process.ID
		lanes[p] = true
		if op.Type == histories.Invoke {
			open[p] = op
			continue
		}
		inv, ok := open[p]
		if !ok {
			continue
		}
		delete(open, p)
		bars = append(bars, bar{process: p, start: inv.Time, end: op.Time, f: op.F, typ: string(op.Type),
			label: describe(inv, op), inWindow: window[inv.Index] || window[op.Index]})
	}
	for p, inv := range open {
		bars = append(bars, bar{process: p, start: inv.Time, end: end, f: inv.F, typ: "pending",
			label: describe(inv, histories.Op{Type: "pending", Time: end}), inWindow: window[inv.Index]})
	}
	procs := make([]int, 0, len(lanes))
	for p := range lanes {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	row := map[int]int{}
	for i, p := range procs {
		row[p] = i
	}
	const laneH, top, left = 18, 30, 60
	pxPerSec := 200.0
	width := left + int(float64(end)/1e9*pxPerSec) + 40
	height := top + laneH*len(procs) + 20
	x := func(t int64) float64 { return left + float64(t)/1e9*pxPerSec }

	fmt.Fprintf(w, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>zlockcheck timeline</title>
<style>body{font:13px sans-serif;margin:8px}svg text{font:10px sans-serif}.legend span{display:inline-block;padding:1px 6px;margin-right:6px}</style></head><body>
<h3>Timeline: %d ops, %d processes, verdict %s</h3>
<div class="legend"><span style="background:#7c7">acquire ok</span><span style="background:#9bd">release ok</span><span style="background:#ccc">fail</span><span style="background:#fb3">info</span><span style="border:1px dashed #c00">never completed</span><span style="outline:2px solid red">in the violation's window</span> hover a bar for details; scroll right for later times (%.0f px per second)</div>
<div style="overflow-x:auto"><svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">
`, len(h), len(procs), html.EscapeString(string(res.Verdict)), pxPerSec, width, height)
	for s := int64(0); s <= end/1e9; s++ {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d">%ds</text>`+"\n",
			x(s*1e9), top-12, x(s*1e9), height, x(s*1e9)+2, top-16, s)
	}
	for i, p := range procs {
		fmt.Fprintf(w, `<text x="2" y="%d">process %d</text>`+"\n", top+i*laneH+12, p)
	}
	for _, b := range bars {
		fill := map[string]string{"ok": "#7c7", "fail": "#ccc", "info": "#fb3", "pending": "#fff"}[b.typ]
		if b.typ == "ok" && b.f == histories.FRelease {
			fill = "#9bd"
		}
		stroke := `stroke="#666" stroke-width="0.5"`
		if b.typ == "pending" {
			stroke = `stroke="#c00" stroke-dasharray="3,2"`
		}
		if b.inWindow {
			stroke = `stroke="red" stroke-width="2"`
		}
		wdt := max(x(b.end)-x(b.start), 1.5)
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" %s><title>%s</title></rect>`+"\n",
			x(b.start), top+row[b.process]*laneH+2, wdt, laneH-4, fill, stroke, html.EscapeString(b.label))
	}
	_, err := fmt.Fprint(w, "</svg></div></body></html>\n")
	return err
}

func describe(inv, done histories.Op) string {
	s := fmt.Sprintf("process %d %s", inv.Process.ID, inv.F)
	if inv.Mode != "" {
		s += " " + inv.Mode
	}
	s += fmt.Sprintf(" → %s  [%.3fs .. %.3fs] index %d", done.Type, float64(inv.Time)/1e9, float64(done.Time)/1e9, inv.Index)
	if done.Error != "" {
		s += " (" + done.Error + ")"
	}
	if done.Lost {
		s += " (lost)"
	}
	return s
}
