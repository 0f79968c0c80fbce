package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// Statuses of a run beyond the model's verdicts.
const (
	// statusError: the run broke down although what it recorded checks valid
	// (results.json has a setup_error); zlockcheck run exits with 3 then.
	statusError = "error"
	// statusBroken: results.json could not be read or parsed.
	statusBroken = "broken"
)

// runInfo is what the list page shows of a run, read from its results.json.
type runInfo struct {
	// ID is the run directory relative to the store, slash-separated.
	ID string
	// URL is the run page.
	URL string
	// Status is the verdict (valid, invalid, unknown), or error or broken.
	Status string
	// Err says why results.json could not be read (Status broken).
	Err     string
	Started string
	Results report.Results
	Nemesis []string
	// config is results.json's config, as written.
	config json.RawMessage
}

// Duration is the run's elapsed time, rounded for reading.
func (r runInfo) Duration() string {
	if r.Results.ElapsedSeconds <= 0 {
		return ""
	}
	return time.Duration(r.Results.ElapsedSeconds * float64(time.Second)).Round(100 * time.Millisecond).String()
}

// Faults are the run's fault classes, or none.
func (r runInfo) Faults() string {
	if len(r.Nemesis) == 0 {
		return "none"
	}
	return strings.Join(r.Nemesis, ", ")
}

// listRuns finds every run below root (see rundir.List), newest first, and reads
// each one's results.json.
func listRuns(root *os.Root) ([]runInfo, error) {
	entries, err := rundir.ListRoot(root)
	runs := make([]runInfo, 0, len(entries))
	for _, e := range entries {
		runs = append(runs, loadRun(root, e.ID))
	}
	return runs, err
}

// loadRun reads the results.json of the run in directory id; a file that does not
// parse makes a broken run, not an error.
func loadRun(root *os.Root, id string) runInfo {
	r := runInfo{ID: id, URL: runURL(id)}
	r.Started = path.Base(id)
	if t, err := rundir.ParseStamp(r.Started); err == nil {
		r.Started = t.Format("2006-01-02 15:04:05 UTC")
	}
	data, err := root.ReadFile(id + "/" + rundir.Results)
	if err == nil {
		err = json.Unmarshal(data, &r.Results)
	}
	if err == nil && r.Results.Verdict == "" {
		err = errors.New("no verdict")
	}
	if err != nil {
		r.Status, r.Err = statusBroken, fmt.Sprintf("%s: %v", rundir.Results, err)
		return r
	}
	// The configuration as written (its keys in their order), and its faults.
	var raw struct {
		Config json.RawMessage `json:"config"`
	}
	if json.Unmarshal(data, &raw) == nil && len(raw.Config) > 0 {
		r.config = raw.Config
		var cfg struct {
			Nemesis []string `json:"nemesis"`
		}
		if json.Unmarshal(raw.Config, &cfg) == nil {
			r.Nemesis = cfg.Nemesis
		}
	}
	r.Status = string(r.Results.Verdict)
	if r.Results.SetupError != "" && r.Results.Verdict == models.Valid {
		r.Status = statusError
	}
	return r
}

// findRun splits a request path into the run directory it names and the path of a
// file inside that run: the run is the shortest prefix that holds a results.json.
func findRun(root *os.Root, segs []string) (run string, rest []string, ok bool) {
	for i := 1; i <= len(segs) && i <= rundir.MaxDepth; i++ {
		dir := strings.Join(segs[:i], "/")
		if fi, err := root.Stat(dir + "/" + rundir.Results); err == nil && fi.Mode().IsRegular() {
			return dir, segs[i:], true
		}
	}
	return "", nil, false
}

// canonical returns the run directory a symbolic link such as store/<test>/latest
// points to, when run is one that stays in the store.
func canonical(root *os.Root, run string) (string, bool) {
	fi, err := root.Lstat(run)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return "", false
	}
	target, err := root.Readlink(run)
	if err != nil || path.IsAbs(target) {
		return "", false
	}
	dir := path.Join(path.Dir(run), target)
	if !fs.ValidPath(dir) || dir == "." {
		return "", false
	}
	if fi, err := root.Lstat(dir); err != nil || !fi.IsDir() {
		return "", false
	}
	return dir, true
}

// fileEntry is one file of a run directory.
type fileEntry struct {
	// Path is relative to the run directory, slash-separated.
	Path string
	URL  string
	Size int64
}

// listFiles lists every regular file below the run directory, in path order.
func listFiles(run *os.Root, id string) ([]fileEntry, error) {
	var files []fileEntry
	err := fs.WalkDir(run.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		size := int64(-1)
		if fi, err := d.Info(); err == nil {
			size = fi.Size()
		}
		files = append(files, fileEntry{Path: p, URL: fileURL(id, p), Size: size})
		return nil
	})
	return files, err
}

// splitPath checks a slash-separated path from a request and splits it: every
// element must be a plain name (no empty, . or .. element, no backslash or NUL).
func splitPath(p string) ([]string, bool) {
	if p == "" {
		return nil, true
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "\\\x00") {
			return nil, false
		}
	}
	return segs, true
}

// escapePath escapes each element of a slash-separated path for a URL.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func runURL(id string) string { return "/run/" + escapePath(id) + "/" }

func fileURL(id, file string) string { return "/run/" + escapePath(id) + "/" + escapePath(file) }
