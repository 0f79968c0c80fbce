package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/report/plots"
)

// Bar kinds, packed into one integer per bar of the timeline's data: the outcome in
// the low two bits, then the function's position in the page's table of functions,
// then flags.
const (
	barOK      = 0
	barFail    = 1
	barInfo    = 2
	barPending = 3
	barFShift  = 2
	barFMask   = 0xff
	barWindow  = 1 << 10 // in a violation's window
	barLost    = 1 << 11 // a release recorded as lost
	barModeR   = 1 << 12 // read mode
	barModeW   = 1 << 13 // write mode
)

// timelineData is embedded in the page as JSON; times are microseconds since the run
// started. Lanes[l] lists the processes drawn on lane l as (process, first, last)
// triples in time order. Bars are columns: bar i is lane[i], s[i]..e[i], kind k[i],
// invoke index ix[i], error errs[err[i]-1] (0: none).
type timelineData struct {
	End        int64             `json:"end"`
	Lanes      [][]int64         `json:"lanes"`
	Fs         []string          `json:"fs"`
	Errs       []string          `json:"errs"`
	Faults     []timelineFault   `json:"faults"`
	Violations []timelineViolate `json:"violations"`
}

type timelineFault struct {
	Label   string `json:"label"`
	Name    string `json:"name"`
	Start   int64  `json:"start"`
	Stop    int64  `json:"stop"`
	Stopped bool   `json:"stopped"`
}

type timelineViolate struct {
	Key   string `json:"key"`
	First int64  `json:"first"`
	From  int64  `json:"from"`
	To    int64  `json:"to"`
	Ops   int    `json:"ops"`
}

// timelineCounts are the op counts the page states in words.
type timelineCounts struct {
	total, client, nemesis, pending, processes int
	byType                                     map[histories.Type]int
	byF                                        map[string]map[string]int
}

// WriteTimeline renders the history as one HTML page that opens quickly however long
// the history: the ops are embedded as compact JSON and drawn on a canvas by a small
// script, a lane per process (processes that never overlap in time, such as a
// crashed process and the one that replaced it, share a lane), each op a bar from its invocation to its completion
// coloured by outcome (acquire ok green, release ok blue, fail purple, info orange,
// never completed outlined red-dashed). The nemesis's faults are shaded and labelled,
// each violation's window is shaded red with its ops outlined, and a red line marks
// its first violation. The page zooms (buttons, keys + and -, ctrl+wheel) and
// scrolls, and shows an op's details under the pointer. It states in text the op
// counts by type and function, the faults, the coverage table cov (what the history
// exercised) and the violations.
func WriteTimeline(w io.Writer, h histories.History, res models.Result, cov coverage.Table) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	data, cols, counts := timelineOf(h, res)
	meta, err := json.Marshal(data)
	if err != nil {
		return err
	}
	writeTimelineHead(bw, h, res, data, counts)
	writeCoverageTable(bw, cov)
	bw.WriteString(`<script id="meta" type="application/json">`)
	bw.Write(meta)
	bw.WriteString("</script>\n<script id=\"bars\" type=\"application/json\">")
	bw.Write(cols)
	bw.WriteString("</script>\n<script>\n")
	bw.WriteString(timelineJS)
	bw.WriteString("</script>\n</body></html>\n")
	return bw.Flush()
}

// timelineOf pairs the client ops of h into bars (written as JSON columns) and
// gathers the faults, violations and counts.
func timelineOf(h histories.History, res models.Result) (timelineData, []byte, timelineCounts) {
	window := map[int64]bool{}
	for _, k := range res.Keys {
		for _, op := range k.Window {
			window[op.Index] = true
		}
	}
	counts := timelineCounts{total: len(h), byType: map[histories.Type]int{}}
	counts.byF, _ = Count(h)
	var end int64 = 1
	for _, op := range h {
		end = max(end, op.Time)
	}
	us := func(t int64) int64 { return t / 1e3 }
	d := timelineData{End: us(end), Errs: []string{}, Faults: []timelineFault{}, Violations: []timelineViolate{}}
	type span struct{ first, last int64 }
	spans := map[int]*span{}
	procs := make([]int, 0, len(h)/2+1) // each bar's process
	fIdx := map[string]int{}
	errIdx := map[string]int{}
	n := len(h)/2 + 1
	s, e, k, ix, errs := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	addBar := func(inv, done histories.Op, typ int) {
		p := inv.Process.ID
		if sp := spans[p]; sp == nil {
			spans[p] = &span{us(inv.Time), us(done.Time)}
		} else {
			sp.last = max(sp.last, us(done.Time))
		}
		f, ok := fIdx[inv.F]
		if !ok {
			f = len(d.Fs)
			fIdx[inv.F] = f
			d.Fs = append(d.Fs, inv.F)
		}
		kind := typ | (f&barFMask)<<barFShift
		if window[inv.Index] || (typ != barPending && window[done.Index]) {
			kind |= barWindow
		}
		if done.Lost {
			kind |= barLost
		}
		switch inv.Mode {
		case histories.ModeRead:
			kind |= barModeR
		case histories.ModeWrite:
			kind |= barModeW
		}
		var ei int
		if done.Error != "" {
			if ei, ok = errIdx[done.Error]; !ok {
				d.Errs = append(d.Errs, done.Error)
				ei = len(d.Errs)
				errIdx[done.Error] = ei
			}
		}
		procs, s, e, k = append(procs, p), append(s, us(inv.Time)), append(e, us(done.Time)), append(k, int64(kind))
		ix, errs = append(ix, inv.Index), append(errs, int64(ei))
	}
	for _, op := range h {
		if op.Process.Nemesis {
			counts.nemesis++
			continue
		}
		counts.client++
		counts.byType[op.Type]++
	}
	pairs := histories.Pairs(h)
	var pending []histories.Op
	for _, p := range pairs {
		if p.Completion < 0 {
			pending = append(pending, h[p.Invoke])
			continue
		}
		typ := barInfo
		switch h[p.Completion].Type {
		case histories.OK:
			typ = barOK
		case histories.Fail:
			typ = barFail
		}
		addBar(h[p.Invoke], h[p.Completion], typ)
	}
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].Index < pending[j].Index })
	for _, inv := range pending {
		addBar(inv, histories.Op{Time: end}, barPending)
	}
	counts.pending = len(pending)
	// Pack the processes into lanes: in order of their first op, each takes the first
	// lane free since before it began.
	order := make([]int, 0, len(spans))
	for p := range spans {
		order = append(order, p)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := spans[order[i]], spans[order[j]]
		return a.first < b.first || (a.first == b.first && order[i] < order[j])
	})
	laneOf := make(map[int]int64, len(order))
	var free []int64 // when each lane's last process ended
	for _, p := range order {
		sp := spans[p]
		l := 0
		for l < len(free) && free[l] >= sp.first {
			l++
		}
		if l == len(free) {
			free = append(free, 0)
			d.Lanes = append(d.Lanes, nil)
		}
		free[l] = sp.last
		laneOf[p] = int64(l)
		d.Lanes[l] = append(d.Lanes[l], int64(p), sp.first, sp.last)
	}
	lane := make([]int64, len(procs))
	for i, p := range procs {
		lane[i] = laneOf[p]
	}
	counts.processes = len(order)
	for _, f := range plots.Faults(h) {
		d.Faults = append(d.Faults, timelineFault{Label: f.Label, Name: f.Name, Start: int64(f.Start * 1e6), Stop: int64(f.Stop * 1e6), Stopped: f.Stopped})
	}
	for _, kr := range res.Keys {
		if kr.Verdict != models.Invalid {
			continue
		}
		v := timelineViolate{Key: kr.Key, First: -1, From: -1, To: -1, Ops: len(kr.Window)}
		if kr.FirstViolation >= 0 {
			v.First = us(kr.FirstViolation)
		}
		for _, op := range kr.Window {
			if v.From < 0 || us(op.Time) < v.From {
				v.From = us(op.Time)
			}
			v.To = max(v.To, us(op.Time))
		}
		d.Violations = append(d.Violations, v)
	}
	if d.Lanes == nil {
		d.Lanes = [][]int64{}
	}
	if d.Fs == nil {
		d.Fs = []string{}
	}
	cols := make([]byte, 0, 40*len(lane)+64)
	cols = append(cols, '{')
	for i, c := range []struct {
		name string
		v    []int64
	}{{"lane", lane}, {"s", s}, {"e", e}, {"k", k}, {"ix", ix}, {"err", errs}} {
		if i > 0 {
			cols = append(cols, ',')
		}
		cols = append(cols, '"')
		cols = append(cols, c.name...)
		cols = append(cols, `":[`...)
		for j, x := range c.v {
			if j > 0 {
				cols = append(cols, ',')
			}
			cols = strconv.AppendInt(cols, x, 10)
		}
		cols = append(cols, ']')
	}
	cols = append(cols, '}')
	return d, cols, counts
}

func writeTimelineHead(w *bufio.Writer, h histories.History, res models.Result, d timelineData, c timelineCounts) {
	esc := html.EscapeString
	fmt.Fprintf(w, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>zlockcheck timeline</title>
<style>
body{font:13px sans-serif;margin:8px;color:#222}
h3{margin:4px 0}
.legend span{display:inline-block;padding:1px 6px;margin-right:6px}
.note{color:#555}
table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ddd;padding:1px 6px;text-align:right}th{background:#f4f4f4}td:first-child{text-align:left}
#wrap{position:relative;border:1px solid #ccc;height:70vh;min-height:240px}
#scroll{position:absolute;inset:0;overflow:auto}
#cv{position:absolute;left:0;top:0;pointer-events:none}
#tip{position:fixed;display:none;background:#ffe;border:1px solid #999;padding:2px 5px;font:12px monospace;pointer-events:none;white-space:pre;z-index:2}
.violation{color:#b00}
pre{background:#f8f8f8;padding:4px;max-height:12em;overflow:auto;white-space:pre-wrap}
details{margin:4px 0}
tr.not-exercised td{background:#fff4e0}
</style></head><body>
<h3>Timeline: %d ops by %d processes on %d lanes, verdict %s</h3>
`, len(h), c.processes, len(d.Lanes), esc(string(res.Verdict)))
	fmt.Fprintf(w, `<p id="counts">History lines: <b data-count="total">%d</b> (client <b data-count="client">%d</b>, nemesis <b data-count="nemesis">%d</b>). Client ops by type: invoke <b data-count="invoke">%d</b>, ok <b data-count="ok">%d</b>, fail <b data-count="fail">%d</b>, info <b data-count="info">%d</b>; never completed <b data-count="pending">%d</b>.</p>
`, c.total, c.client, c.nemesis, c.byType[histories.Invoke], c.byType[histories.OK], c.byType[histories.Fail], c.byType[histories.Info], c.pending)
	fs := make([]string, 0, len(c.byF))
	for f := range c.byF {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	w.WriteString(`<details open><summary>ops by function and type</summary><table id="by-f"><tr><th>f</th><th>invoke</th><th>ok</th><th>fail</th><th>info</th></tr>` + "\n")
	for _, f := range fs {
		m := c.byF[f]
		fmt.Fprintf(w, `<tr><td>%s</td><td data-count="%s invoke">%d</td><td data-count="%s ok">%d</td><td data-count="%s fail">%d</td><td data-count="%s info">%d</td></tr>`+"\n",
			esc(f), esc(f), m["invoke"], esc(f), m["ok"], esc(f), m["fail"], esc(f), m["info"])
	}
	w.WriteString("</table></details>\n")
	if len(d.Faults) == 0 {
		w.WriteString(`<p id="faults">No faults injected.</p>` + "\n")
	} else {
		fmt.Fprintf(w, `<details open><summary>%d faults (shaded on the timeline)</summary><table id="faults"><tr><th>fault</th><th>start (s)</th><th>stop (s)</th></tr>`+"\n", len(d.Faults))
		for _, f := range d.Faults {
			stop := fmt.Sprintf("%.3f", float64(f.Stop)/1e6)
			if !f.Stopped {
				stop = "never stopped (shaded to the end)"
			}
			fmt.Fprintf(w, `<tr><td class="fault">%s</td><td>%.3f</td><td>%s</td></tr>`+"\n", esc(f.Label), float64(f.Start)/1e6, stop)
		}
		w.WriteString("</table></details>\n")
	}
	if len(d.Violations) == 0 {
		w.WriteString(`<p id="no-violation">No violation found.</p>` + "\n")
	} else {
		w.WriteString(`<div id="violations">` + "\n")
		for i, v := range d.Violations {
			key := v.Key
			if key == "" {
				key = "(the lock)"
			}
			fmt.Fprintf(w, `<p class="violation">Violation on key %s: first violation at %.6fs; its window of %d ops spans %.6fs to %.6fs (shaded red, its ops outlined red). <a href="#v%d" data-violation="%d">show</a></p>`+"\n",
				esc(key), float64(v.First)/1e6, v.Ops, float64(v.From)/1e6, float64(v.To)/1e6, i, i)
			for _, kr := range res.Keys {
				if kr.Key == v.Key && kr.Witness != "" {
					fmt.Fprintf(w, "<pre>%s</pre>\n", esc(strings.TrimRight(kr.Witness, "\n")))
				}
			}
		}
		w.WriteString("</div>\n")
	}
	w.WriteString(`<div class="legend"><span style="background:#5c5">acquire ok</span><span style="background:#6ae">release ok</span><span style="background:#a9e">fail</span><span style="background:#fb3">info</span><span style="background:#ccc">other ok</span><span style="border:1px dashed #c00">never completed</span><span style="outline:2px solid red">in a violation's window</span>
<button id="zin">zoom in (+)</button> <button id="zout">zoom out (&minus;)</button> <button id="zfit">fit (0)</button> ctrl+wheel zooms at the pointer; hover a bar for its details. <span id="scale"></span></div>
<p class="note">One lane per process; processes that never overlap in time (a crashed process and the one that replaced it) share a lane, a grey tick marks where the next one begins, and a lane's label names its process at the left edge of the view.</p>
<div id="wrap"><div id="scroll"><div id="spacer"></div></div><canvas id="cv"></canvas></div><div id="tip"></div>
<noscript>The timeline needs JavaScript; the counts, faults and violations above do not.</noscript>
`)
}

// timelineJS draws the timeline from the embedded data: only the lanes and times in
// view, so it stays quick for any number of ops.
const timelineJS = `(function(){
"use strict";
const M=JSON.parse(document.getElementById("meta").textContent);
const B=JSON.parse(document.getElementById("bars").textContent);
const LEFT=70,TOP=36,LH=14,N=B.s.length,NL=M.lanes.length;
const byLane=[];for(let l=0;l<NL;l++)byLane.push([]);
for(let i=0;i<N;i++)byLane[B.lane[i]].push(i);
const wrap=document.getElementById("wrap"),sc=document.getElementById("scroll"),sp=document.getElementById("spacer"),cv=document.getElementById("cv"),tip=document.getElementById("tip"),ctx=cv.getContext("2d");
const bandColors=["rgba(100,149,237,0.22)","rgba(218,165,32,0.25)","rgba(154,205,50,0.25)","rgba(186,85,211,0.2)","rgba(32,178,170,0.22)","rgba(150,150,150,0.25)"];
const colorOf={};M.faults.forEach(f=>{if(!(f.name in colorOf))colorOf[f.name]=bandColors[Object.keys(colorOf).length%bandColors.length];});
const levels=[];{const ends=[];M.faults.forEach((f,i)=>{let l=0;while(l<ends.length&&ends[l]>f.start)l++;ends[l]=f.stop;levels[i]=l;});}
let scale=1;
wrap.style.height=Math.max(160,Math.min(window.innerHeight*0.75,TOP+NL*LH+30))+"px";
function fit(){scale=Math.max((sc.clientWidth-LEFT-20)/Math.max(M.end,1),1e-9);layout();sc.scrollLeft=0;}
function layout(){sp.style.width=(LEFT+M.end*scale+20)+"px";sp.style.height=(TOP+NL*LH+10)+"px";document.getElementById("scale").textContent=(scale*1e6).toPrecision(3)+" px per second";draw();}
function zoom(f,px){const x=(px===undefined?sc.clientWidth/2:px);const t=(sc.scrollLeft+x-LEFT)/scale;scale=Math.min(Math.max(scale*f,1e-9),50);layout();sc.scrollLeft=t*scale+LEFT-x;draw();}
function procAt(l,t){const a=M.lanes[l];let lo=0,hi=a.length/3;while(lo<hi){const m=(lo+hi)>>1;if(a[3*m+2]<t)lo=m+1;else hi=m;}return Math.min(lo,a.length/3-1);}
function first(arr,t){let lo=0,hi=arr.length;while(lo<hi){const m=(lo+hi)>>1;if(B.e[arr[m]]<t)lo=m+1;else hi=m;}return lo;}
function fill(k){const typ=k&3,f=M.fs[(k>>2)&255];if(typ==1)return"#a9e";if(typ==2)return"#fb3";if(typ==3)return"#fff";if(f=="acquire")return"#5c5";if(f=="release")return"#6ae";return"#ccc";}
function niceStep(span){const raw=span/10,p=Math.pow(10,Math.floor(Math.log10(raw)));for(const m of[1,2,5,10])if(raw<=p*m)return p*m;return p*10;}
function draw(){
 const dpr=window.devicePixelRatio||1,W=sc.clientWidth,H=sc.clientHeight;
 if(cv.width!=W*dpr||cv.height!=H*dpr){cv.width=W*dpr;cv.height=H*dpr;cv.style.width=W+"px";cv.style.height=H+"px";}
 ctx.setTransform(dpr,0,0,dpr,0,0);ctx.clearRect(0,0,W,H);
 const sl=sc.scrollLeft,st=sc.scrollTop,t0=(sl)/scale,t1=(sl+W-LEFT)/scale;
 const X=t=>LEFT+t*scale-sl;
 const l0=Math.max(0,Math.floor(st/LH)),l1=Math.min(NL-1,Math.ceil((st+H-TOP)/LH));
 const Y=l=>TOP+l*LH-st;
 ctx.font="10px sans-serif";
 M.violations.forEach(v=>{if(v.from>=0){const a=X(v.from),b=X(v.to);ctx.fillStyle="rgba(220,0,0,0.12)";ctx.fillRect(a,TOP,Math.max(b-a,2),H-TOP);}});
 for(let l=l0;l<=l1;l++){const arr=byLane[l],y=Y(l)+2;
  for(let j=first(arr,t0);j<arr.length;j++){const i=arr[j];if(B.s[i]>t1)break;const k=B.k[i],x=X(B.s[i]),w=Math.max((B.e[i]-B.s[i])*scale,1.2);
   ctx.fillStyle=fill(k);ctx.fillRect(x,y,w,LH-4);
   if((k&3)==3){ctx.setLineDash([3,2]);ctx.strokeStyle="#c00";ctx.lineWidth=1;ctx.strokeRect(x,y,w,LH-4);ctx.setLineDash([]);}
   else if(w>4){ctx.strokeStyle="#777";ctx.lineWidth=0.5;ctx.strokeRect(x,y,w,LH-4);}
   if(k&1024){ctx.strokeStyle="red";ctx.lineWidth=2;ctx.strokeRect(x,y,w,LH-4);}
  }}
 M.faults.forEach((f,i)=>{const a=Math.max(X(f.start),LEFT),b=Math.min(X(f.stop),W);if(b<LEFT||a>W)return;ctx.fillStyle=colorOf[f.name];ctx.fillRect(a,TOP,Math.max(b-a,1),H-TOP);});
 M.violations.forEach(v=>{if(v.first>=0){const x=X(v.first);ctx.strokeStyle="#d00";ctx.lineWidth=1.5;ctx.beginPath();ctx.moveTo(x,TOP);ctx.lineTo(x,H);ctx.stroke();ctx.fillStyle="#d00";ctx.fillText("first violation"+(v.key?" ("+v.key+")":""),x+3,H-4);}});
 ctx.fillStyle="#fff";ctx.fillRect(0,0,W,TOP);ctx.fillRect(0,0,LEFT,H);
 ctx.strokeStyle="#999";ctx.lineWidth=1;ctx.beginPath();ctx.moveTo(LEFT,TOP-0.5);ctx.lineTo(W,TOP-0.5);ctx.stroke();
 const step=niceStep(t1-t0);ctx.fillStyle="#333";
 for(let t=Math.ceil(t0/step)*step;t<=t1;t+=step){const x=X(t);ctx.fillRect(x,TOP-5,1,5);ctx.fillText((t/1e6).toFixed(Math.max(0,-Math.floor(Math.log10(step/1e6)))) +"s",x+2,TOP-7);}
 M.faults.forEach((f,i)=>{const a=Math.max(X(f.start),LEFT);if(X(f.stop)<LEFT||a>W)return;ctx.fillStyle=colorOf[f.name].replace(/[\d.]+\)$/,"0.9)");ctx.fillRect(a,2,Math.max(Math.min(X(f.stop),W)-a,1),4);ctx.fillStyle="#333";ctx.fillText(f.label,a+2,13+10*(levels[i]%2));});
 for(let l=l0;l<=l1;l++){const a=M.lanes[l];for(let j=procAt(l,t0)+1;j<a.length/3&&a[3*j+1]<=t1;j++){const x=X(a[3*j+1]);ctx.fillStyle="#555";ctx.fillRect(x-1,Y(l),1,LH);const next=j+1<a.length/3?X(a[3*j+4]):W;if(next-x>60){ctx.fillStyle="#777";ctx.fillText("p"+a[3*j],x+1,Y(l)+8);}}}
 ctx.fillStyle="#fff";ctx.fillRect(0,TOP,LEFT,H-TOP);ctx.fillStyle="#333";for(let l=l0;l<=l1;l++){const a=M.lanes[l];ctx.fillText("process "+a[3*procAt(l,t0)],2,Y(l)+LH-3);}
}
function at(ev){const r=sc.getBoundingClientRect(),x=ev.clientX-r.left,y=ev.clientY-r.top;if(x<LEFT||y<TOP)return -1;const l=Math.floor((y-TOP+sc.scrollTop)/LH);if(l<0||l>=NL)return -1;const t=(x-LEFT+sc.scrollLeft)/scale,slack=3/scale,arr=byLane[l];const j=first(arr,t-slack);if(j<arr.length&&B.s[arr[j]]<=t+slack)return arr[j];return -1;}
function describe(i){const k=B.k[i],typ=["ok","fail","info","never completed"][k&3];let s="process "+M.lanes[B.lane[i]][3*procAt(B.lane[i],B.s[i])]+" "+M.fs[(k>>2)&255];if(k&4096)s+=" read";if(k&8192)s+=" write";s+=" \u2192 "+typ+"  ["+(B.s[i]/1e6).toFixed(6)+"s .. "+(B.e[i]/1e6).toFixed(6)+"s] index "+B.ix[i];if(B.err[i])s+=" ("+M.errs[B.err[i]-1]+")";if(k&2048)s+=" (lost)";if(k&1024)s+="\nin a violation's window";return s;}
sc.addEventListener("scroll",draw,{passive:true});
sc.addEventListener("wheel",ev=>{if(!ev.ctrlKey&&!ev.metaKey)return;ev.preventDefault();const r=sc.getBoundingClientRect();zoom(ev.deltaY<0?1.25:0.8,ev.clientX-r.left);},{passive:false});
sc.addEventListener("mousemove",ev=>{const i=at(ev);if(i<0){tip.style.display="none";return;}tip.textContent=describe(i);tip.style.display="block";tip.style.left=(ev.clientX+12)+"px";tip.style.top=(ev.clientY+12)+"px";});
sc.addEventListener("mouseleave",()=>{tip.style.display="none";});
document.getElementById("zin").onclick=()=>zoom(2);document.getElementById("zout").onclick=()=>zoom(0.5);document.getElementById("zfit").onclick=fit;
document.addEventListener("keydown",ev=>{if(ev.target.tagName=="INPUT")return;if(ev.key=="+"||ev.key=="=")zoom(2);else if(ev.key=="-")zoom(0.5);else if(ev.key=="0")fit();});
function show(n){const v=M.violations[n];if(v.from<0)return;const span=Math.max(v.to-v.from,1);scale=Math.min((sc.clientWidth-LEFT-20)/(span*3),50);layout();sc.scrollLeft=Math.max(0,(v.from-span)*scale);let l=-1;for(let i=0;i<N;i++)if(B.k[i]&1024){l=B.lane[i];break;}if(l>=0)sc.scrollTop=Math.max(0,l*LH-40);draw();wrap.scrollIntoView();}
document.querySelectorAll("[data-violation]").forEach(a=>a.addEventListener("click",ev=>{ev.preventDefault();show(+a.dataset.violation);}));
window.addEventListener("resize",draw);
fit();
{const m=/^#v(\d+)$/.exec(location.hash);if(m&&M.violations[+m[1]])show(+m[1]);}
document.documentElement.dataset.readyMs=Math.round(performance.now());
})();
`

// writeCoverageTable writes the coverage table as a folded HTML table beside the
// timeline's other tables: a row at 0 is marked and says what the run could not
// have found.
func writeCoverageTable(w *bufio.Writer, cov coverage.Table) {
	esc := html.EscapeString
	fmt.Fprintf(w, `<details open><summary>coverage: what the run exercised (%s)</summary>`, esc(cov.Tally()))
	if !cov.Exercised {
		fmt.Fprintf(w, `<p class="violation" id="nothing-exercised">%s</p>`, esc(coverage.NothingExercised))
	}
	w.WriteString(`<table id="coverage"><tr><th>situation</th><th>count</th><th>what bugs live here</th></tr>` + "\n")
	for _, r := range cov.Rows {
		cls, bugs, count := "", r.Bugs, fmt.Sprint(r.Count)
		if r.NotExercised != "" {
			cls, bugs = ` class="not-exercised"`, r.NotExercised
		}
		if r.NotApplicable != "" {
			cls, bugs, count = ` class="not-applicable"`, r.NotApplicable, "-"
		}
		by := ""
		if t := r.ByText(); t != "" {
			by = " (" + esc(t) + ")"
		}
		fmt.Fprintf(w, `<tr%s data-row="%s"><td>%s%s</td><td data-count="%s">%s</td><td style="text-align:left">%s</td></tr>`+"\n",
			cls, esc(r.ID), esc(r.Situation), by, esc(r.ID), count, esc(bugs))
	}
	w.WriteString("</table></details>\n")
}
