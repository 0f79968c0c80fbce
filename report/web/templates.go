package web

import (
	"fmt"
	"html/template"

	"github.com/zlockcheck/zlockcheck/models/coverage"
)

// funcMap holds the helpers of the page templates.
func funcMap() template.FuncMap {
	return template.FuncMap{
		"verdictClass": verdictClass,
		"size":         humanSize,
		// nothingExercised says why a history that exercised nothing has no verdict.
		"nothingExercised": func() string { return coverage.NothingExercised },
	}
}

// humanSize prints a file size for reading.
func humanSize(n int64) string {
	switch {
	case n < 0:
		return "?"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

const listHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>zlockcheck runs</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body>
<h1>zlockcheck runs</h1>
<p class="note">Runs in {{.Store}}, newest first: {{len .Runs}}.</p>
{{if .Runs}}<table class="runs">
<thead><tr><th>verdict</th><th>started</th><th>test</th><th>recipe</th><th>faults</th><th class="num">seed</th><th class="num">duration</th><th class="num">ops</th></tr></thead>
<tbody>
{{range .Runs}}<tr class="run" data-run="{{.ID}}" data-status="{{.Status}}">
<td><span class="verdict {{.Status}}"{{with .Results.SetupError}} title="{{.}}"{{end}}>{{.Status}}</span></td>
<td><a class="runlink" href="{{.URL}}">{{.Started}}</a></td>
{{if .Err}}<td colspan="6" class="error">{{.ID}}: {{.Err}}</td>
{{else}}<td>{{.Results.Test}}</td>
<td>{{.Results.Recipe}}</td>
<td>{{.Faults}}</td>
<td class="num">{{.Results.Seed}}</td>
<td class="num">{{.Duration}}</td>
<td class="num">{{.Results.Ops}}</td>
{{end}}</tr>
{{end}}</tbody>
</table>
{{else}}<p>No runs yet: <code>zlockcheck run</code> keeps each run here.</p>
{{end}}</body></html>
`

const runHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Run.Status}}: {{.Run.ID}}</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body>
<p><a href="/">all runs</a></p>
<h1><span class="verdict {{.Run.Status}}" id="verdict">{{.Run.Status}}</span> {{with .Run.Results.Test}}{{.}}{{else}}{{.Run.ID}}{{end}}</h1>
<section id="reason" class="reason">
{{with .Run.Err}}<p class="error">This run is broken: {{.}}</p>{{end}}
{{with .Run.Results.SetupError}}<p class="error">The run broke down: {{.}}</p>{{end}}
{{with .Passed}}<p class="reason-ok" id="all-passed">Every check {{if $.Reasons}}that decides the verdict {{end}}passed{{if $.Run.Results.SetupError}} on what the run recorded before it broke down{{end}}: {{range $i, $c := .}}{{if $i}}, {{end}}{{$c.Key}} ({{$c.Checker}}){{end}}.</p>
{{end}}{{range .Reasons}}<div class="reason-check {{verdictClass .Verdict}}" data-key="{{.Key}}" data-verdict="{{.Verdict}}">
<p class="reason-head">key <b>{{.Key}}</b>: <span class="verdict {{verdictClass .Verdict}}">{{.Verdict}}</span> ({{.Checker}} checker{{with .FirstViolation}}, first violation at {{.}}{{end}}){{if .Advisory}} <span class="advisory">advisory: the data the lock protects decides the verdict</span>{{end}}</p>
{{if .CauseClass}}<p class="cause" data-class="{{.CauseClass}}"><b>cause: {{.CauseClass}}</b>: {{.CauseWhy}}</p>
{{with .Fix}}<p class="fix"><b>to close the window:</b> {{.}}</p>
{{end}}{{end}}{{if .Witness}}<pre class="witness">{{.Witness}}</pre>
{{end}}</div>
{{end}}</section>
<h2 id="about">The run</h2>
<table class="facts" id="facts">
<tr><th>run</th><td>{{.Run.ID}}</td></tr>
<tr><th>started</th><td>{{.Run.Started}}</td></tr>
{{with .Run.Results}}{{if .Recipe}}<tr><th>recipe</th><td>{{.Recipe}}{{with .RecipeVersion}} ({{.}}){{end}}</td></tr>{{end}}
{{if .Model}}<tr><th>model</th><td>{{.Model}}{{if gt .Permits 1}} ({{.Permits}} permits){{end}}</td></tr>{{end}}
{{if .Seed}}<tr><th>seed</th><td>{{.Seed}}</td></tr>{{end}}
{{if .Ops}}<tr><th>ops</th><td>{{.Ops}} by {{.Processes}} processes</td></tr>{{end}}
{{if .CyclesPerSecond}}<tr><th>lock cycles</th><td>{{printf "%.1f" .CyclesPerSecond}} per second</td></tr>{{end}}
{{if .Interrupted}}<tr><th>interrupted</th><td>yes</td></tr>{{end}}
{{with $.ServerVersion}}<tr><th>{{$.Service}}</th><td>{{.}}</td></tr>{{end}}
{{if .ToolVersion}}<tr><th>zlockcheck</th><td>{{.ToolVersion}}</td></tr>{{end}}
{{if .RunID}}<tr><th>run id</th><td>{{.RunID}}</td></tr>{{end}}{{end}}
{{if not .Run.Err}}<tr><th>faults</th><td>{{.Run.Faults}}</td></tr>
<tr><th>duration</th><td>{{.Run.Duration}}</td></tr>{{end}}
</table>
{{if .Reports}}<h2>Reports</h2>
<ul class="reports">{{range .Reports}}<li><a class="report" href="{{.URL}}">{{.Name}}</a></li>{{end}}</ul>
{{end}}{{if .Plots}}<h2>Plots</h2>
<div class="plots">{{range .Plots}}<figure><img class="plot" src="{{.URL}}" alt="{{.Name}}" data-loaded="pending"><figcaption>{{.Name}}</figcaption></figure>
{{end}}</div>
{{end}}{{if .Checks}}<h2>Checks</h2>
<table class="checks">
<thead><tr><th>key</th><th>verdict</th><th>checker</th><th>ops</th><th>first violation</th><th>cause</th></tr></thead>
<tbody>
{{range .Checks}}<tr class="check" data-key="{{.Key}}">
<td>{{.Key}}</td>
<td><span class="verdict {{verdictClass .Verdict}}">{{.Verdict}}</span>{{if .Advisory}} <span class="advisory" title="the data the lock protects decides the verdict">advisory</span>{{end}}</td>
<td>{{.Checker}}</td>
<td class="num">{{.Ops}}</td>
<td>{{.FirstViolation}}</td>
<td>{{.CauseClass}}</td>
</tr>
{{end}}</tbody>
</table>
{{end}}{{with .Run.Results.Warnings}}<h2>Warnings</h2>
<ul>{{range .}}<li>{{.}}</li>{{end}}</ul>
{{end}}{{if .Counts}}<h2>Operations</h2>
<table class="counts">
<thead><tr><th>f</th><th>invoke</th><th>ok</th><th>fail</th><th>info</th></tr></thead>
<tbody>{{range .Counts}}<tr><td>{{.F}}</td><td class="num">{{.Invoke}}</td><td class="num">{{.OK}}</td><td class="num">{{.Fail}}</td><td class="num">{{.Info}}</td></tr>
{{end}}</tbody>
</table>
{{end}}{{with .Run.Results.Coverage}}{{if .Rows}}<h2 id="coverage">Coverage</h2>
<p>What the run exercised: {{.Tally}} (a situation at 0 means the run could not have found the bugs that live there).</p>
{{if not .Exercised}}<p class="error" id="nothing-exercised">{{nothingExercised}}</p>
{{end}}<table class="coverage">
<thead><tr><th>situation</th><th>count</th><th>what bugs live here</th></tr></thead>
<tbody>{{range .Rows}}<tr class="coverage-row{{if .NotExercised}} not-exercised{{end}}{{if .NotApplicable}} not-applicable{{end}}" data-row="{{.ID}}"><td>{{.Situation}}{{with .ByText}} ({{.}}){{end}}</td><td class="num">{{if .NotApplicable}}-{{else}}{{.Count}}{{end}}</td><td>{{if .NotApplicable}}{{.NotApplicable}}{{else if .NotExercised}}{{.NotExercised}}{{else}}{{.Bugs}}{{end}}</td></tr>
{{end}}</tbody>
</table>
{{end}}{{end}}{{with .Run.Results.Herd}}<h2 id="herd">Herd effect</h2>
<p class="herd-verdict" data-verdict="{{.Verdict}}"><b>{{.Line}}</b></p>
<p class="herd-figures">{{.Figures}}</p>
{{end}}<h2 id="files">Files</h2>
{{with .FilesErr}}<p class="error">Could not list every file: {{.}}</p>{{end}}
<table class="files">
<tbody>{{range .Files}}<tr><td><a class="file" href="{{.URL}}">{{.Path}}</a></td><td class="num">{{size .Size}}</td><td><a class="download" href="{{.URL}}?download=1">download</a></td></tr>
{{end}}</tbody>
</table>
{{if .Config}}<h2>Configuration</h2>
<pre class="config">{{.Config}}</pre>
{{end}}<script src="/static/page.js"></script>
</body></html>
`

const styleCSS = `body { font: 14px/1.4 sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; }
thead th { border-bottom: 1px solid #999; }
tbody tr { border-bottom: 1px solid #eee; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { display: inline-block; min-width: 60px; padding: 2px 8px; text-align: center; font-weight: bold; color: #fff; }
.verdict.valid { background: #1e8c3a; }
.verdict.invalid { background: #d0312d; }
.verdict.unknown, .verdict.error, .verdict.broken { background: #f2a900; color: #222; }
.error { color: #a0221e; }
.note { color: #666; }
.advisory { color: #666; font-style: italic; }
.reason-check { border-left: 4px solid #f2a900; padding: 2px 0 2px 10px; margin: 10px 0; }
.reason-check.invalid { border-left-color: #d0312d; }
.reason-check p { margin: 4px 0; }
.reason-check .verdict { min-width: 0; padding: 0 6px; }
.reason-ok { font-weight: bold; }
tr.not-exercised td { background: #fff4e0; }
pre { background: #f6f6f6; padding: 6px; margin: 0; max-width: 900px; overflow-x: auto; white-space: pre-wrap; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; }
img.plot { display: block; max-width: 100%; border: 1px solid #ddd; }
.plot-broken { color: #a0221e; }
`

// pageJS marks each plot, once the page has loaded, with whether it could be shown
// (data-loaded="yes" or "no") and says so under a plot that could not.
const pageJS = `window.addEventListener("load", function () {
  document.querySelectorAll("img.plot").forEach(function (img) {
    var ok = img.complete && img.naturalWidth > 0;
    img.setAttribute("data-loaded", ok ? "yes" : "no");
    if (!ok) {
      var p = document.createElement("p");
      p.className = "plot-broken";
      p.textContent = img.alt + " could not be shown";
      img.insertAdjacentElement("afterend", p);
    }
  });
});
`
