package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// plotFiles are the plots a run may have, shown in this order on its page.
func plotFiles() []string { return []string{rundir.Latency, rundir.Rate} }

// listPage is the data of the list page.
type listPage struct {
	Store string
	Runs  []runInfo
}

// runPage is the data of a run's page.
type runPage struct {
	Run runInfo
	// Reasons are the checks that make the run other than valid, the deciding ones
	// first (report.Reasons): what the page opens with.
	Reasons []checkRow
	// Passed are, for a valid run, the checks that decided it.
	Passed []checkRow
	// Service is the lock service's name as shown ("ZooKeeper", "Redis") and
	// ServerVersion its servers' version (report.Results.Server, DisplayVersion).
	Service, ServerVersion string
	Reports                []link
	Plots                  []link
	Checks                 []checkRow
	Counts                 []countRow
	Config                 string
	Files                  []fileEntry
	// FilesErr says why the run directory could not be listed in full.
	FilesErr string
}

type link struct{ Name, URL string }

type checkRow struct {
	Key, Verdict, Checker, Witness, FirstViolation string
	// CauseClass is a violation's cause class, if known; CauseWhy says why, and Fix
	// what would close the window (a configuration finding).
	CauseClass, CauseWhy, Fix string
	Ops                       int
	Advisory                  bool
}

// newCheckRow is how the page shows a check of results.json.
func newCheckRow(c report.Check) checkRow {
	row := checkRow{Key: report.KeyName(c.Key), Verdict: string(c.Verdict), Checker: c.Checker, Witness: c.Witness, Ops: c.Ops, Advisory: c.Advisory}
	if c.Cause != nil {
		row.CauseClass, row.CauseWhy, row.Fix = string(c.Cause.Class), c.Cause.Why, c.Cause.Fix
	}
	if c.FirstViolationSeconds != nil {
		row.FirstViolation = fmt.Sprintf("%.3f s", *c.FirstViolationSeconds)
	}
	return row
}

type countRow struct {
	F                      string
	Invoke, OK, Fail, Info int
}

// serveRun serves /run/<run>/ (the run's page) and /run/<run>/<file>.
func (h *Handler) serveRun(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	dirRequest := strings.HasSuffix(p, "/")
	segs, ok := splitPath(strings.TrimSuffix(p, "/"))
	if !ok {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	if len(segs) == 0 {
		http.Redirect(w, r, "/", http.StatusFound)
		return
	}
	root, err := os.OpenRoot(h.store)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer root.Close()
	id, rest, ok := findRun(root, segs)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if dir, ok := canonical(root, id); ok {
		// store/latest and store/<test>/latest: send the browser to the run itself.
		target := runURL(dir)
		if len(rest) > 0 {
			target = fileURL(dir, strings.Join(rest, "/"))
		}
		http.Redirect(w, r, target, http.StatusFound)
		return
	}
	run, err := root.OpenRoot(id)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer run.Close()
	if len(rest) == 0 {
		if !dirRequest {
			http.Redirect(w, r, runURL(id), http.StatusMovedPermanently)
			return
		}
		render(w, h.run, buildRunPage(root, run, id))
		return
	}
	serveFile(w, r, run, id, strings.Join(rest, "/"))
}

// buildRunPage gathers what the run page shows.
func buildRunPage(root, run *os.Root, id string) runPage {
	info := loadRun(root, id)
	page := runPage{Run: info}
	if service, version := info.Results.Server(); version != "" {
		page.Service, page.ServerVersion = report.ServiceTitle(service), version
	}
	for _, c := range report.Reasons(info.Results.Checks) {
		page.Reasons = append(page.Reasons, newCheckRow(c))
	}
	if info.Err == "" && info.Results.Verdict == models.Valid {
		for _, c := range info.Results.Checks {
			if !c.Advisory {
				page.Passed = append(page.Passed, newCheckRow(c))
			}
		}
	}
	files, err := listFiles(run, id)
	if err != nil {
		page.FilesErr = err.Error()
	}
	page.Files = files
	has := map[string]bool{}
	for _, f := range files {
		has[f.Path] = true
	}
	for _, name := range []string{rundir.Timeline, rundir.Linearizability} {
		if has[name] {
			page.Reports = append(page.Reports, link{Name: name, URL: fileURL(id, name)})
		}
	}
	shown := map[string]bool{}
	for _, name := range plotFiles() {
		if has[name] {
			page.Plots = append(page.Plots, link{Name: name, URL: fileURL(id, name)})
			shown[name] = true
		}
	}
	for _, f := range files { // any other plot the run directory holds
		if !shown[f.Path] && !strings.Contains(f.Path, "/") && path.Ext(f.Path) == ".png" {
			page.Plots = append(page.Plots, link{Name: f.Path, URL: f.URL})
		}
	}
	for _, c := range info.Results.Checks {
		page.Checks = append(page.Checks, newCheckRow(c))
	}
	fs := make([]string, 0, len(info.Results.Counts))
	for f := range info.Results.Counts {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	for _, f := range fs {
		c := info.Results.Counts[f]
		page.Counts = append(page.Counts, countRow{F: f, Invoke: c["invoke"], OK: c["ok"], Fail: c["fail"], Info: c["info"]})
	}
	var cfg bytes.Buffer
	if len(info.config) > 0 && string(info.config) != "null" && json.Indent(&cfg, info.config, "", "  ") == nil {
		page.Config = cfg.String()
	}
	return page
}

// serveFile serves one file of a run directory, opened through the run's own root so
// that neither .. nor a symbolic link leads out of it. ?download=1 asks the browser
// to save it.
func serveFile(w http.ResponseWriter, r *http.Request, run *os.Root, id, name string) {
	fi, err := run.Stat(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if fi.IsDir() {
		http.Redirect(w, r, runURL(id)+"#files", http.StatusFound)
		return
	}
	if !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	f, err := run.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	ctype, err := contentType(name, f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ctype)
	if r.URL.Query().Get("download") != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(name)}))
	}
	http.ServeContent(w, r, path.Base(name), fi.ModTime(), f)
}

// contentType names the type of a run's file by its extension; a file of another
// kind (the servers' myid, their data files) is text/plain if it looks like text and
// application/octet-stream if not, never anything a browser would run.
func contentType(name string, f io.ReadSeeker) (string, error) {
	switch strings.ToLower(path.Ext(name)) {
	case ".html", ".htm":
		return "text/html; charset=utf-8", nil
	case ".json":
		return "application/json", nil
	case ".jsonl", ".ndjson":
		return "application/jsonl; charset=utf-8", nil
	case ".png":
		return "image/png", nil
	case ".svg":
		return "image/svg+xml", nil
	case ".xml":
		return "application/xml", nil
	case ".log", ".txt", ".cfg", ".edn", ".properties", ".out", ".err":
		return "text/plain; charset=utf-8", nil
	}
	buf := make([]byte, 512)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if t := http.DetectContentType(buf[:n]); strings.HasPrefix(t, "text/plain") {
		return t, nil
	}
	return "application/octet-stream", nil
}

// verdictClass is the CSS class of a check's verdict.
func verdictClass(v string) string {
	switch models.Verdict(v) {
	case models.Valid, models.Invalid, models.Unknown:
		return v
	}
	return statusError
}
