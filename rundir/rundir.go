// Package rundir owns the layout of a run directory: where a run is stored
// (STORE/TEST/STAMP, the stamp being its start time), what its files are called, the
// `latest` links (STORE/latest and STORE/TEST/latest point at the newest run), how
// runs are found under a store and how one is removed. It knows file names and places,
// not what the files say: the harness writes them, report, web and the CLI read them,
// each through this package. It imports nothing of the project.
package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The files of a run directory, relative to it.
const (
	// Config is the run's configuration, written by the harness before the run.
	Config = "config.json"
	// History is every operation, one JSON line each (package histories).
	History = "history.jsonl"
	// Results is the report's verdict and what it was based on (package report).
	Results = "results.json"
	// JUnit is one test case per check, for CI.
	JUnit = "junit.xml"
	// Nemesis is the history's nemesis ops.
	Nemesis = "nemesis.jsonl"
	// Timings is the set-up and teardown costs, for benchmarks.
	Timings = "timings.json"
	// Herd is the servers' watch tables and request counters sampled during the
	// workload, one JSON line per sample (package herd): what the herd record of
	// results.json is computed from.
	Herd = "herd.jsonl"
	// Timeline is the HTML timeline of the history.
	Timeline = "timeline.html"
	// Linearizability is porcupine's visualization of a violation (invalid runs).
	Linearizability = "linearizability.html"
	// Latency and Rate are the plots of the history.
	Latency = "latency.png"
	Rate    = "rate.png"
	// Servers holds each server's directory (servers/s1, servers/s2, ...).
	Servers = "servers"
	// Workers holds each worker process's log.
	Workers = "workers"
)

// Latest is the name of the links to the newest run: STORE/latest and STORE/TEST/latest.
const Latest = "latest"

// StampLayout is the time layout of a run directory's name (its start time, UTC).
const StampLayout = "20060102T150405.000Z"

// MaxDepth bounds how deep below a store a run directory may be: STORE/TEST/STAMP is
// 2, a store kept inside a store (store/chaos/TEST/STAMP) 3.
const MaxDepth = 4

// Dir is the path of a run directory. Create and Open return one; a Dir made from a
// plain path (Dir(path)) is not checked.
type Dir string

// Path returns the directory's path.
func (d Dir) Path() string { return string(d) }

// File returns the path of the run's file name (one of the constants above).
func (d Dir) File(name string) string { return filepath.Join(string(d), name) }

// HistoryPath returns the path of the run's history.jsonl.
func (d Dir) HistoryPath() string { return d.File(History) }

// ServersDir returns the directory that holds each server's directory (the
// harness's EnsembleConfig.Dir): servers/s1, servers/s2, ...
func (d Dir) ServersDir() string { return d.File(Servers) }

// ServerDir returns server id's directory (servers/sID: zoo.cfg, server.log,
// srvr.txt, data/).
func (d Dir) ServerDir(id int) string { return filepath.Join(d.ServersDir(), fmt.Sprintf("s%d", id)) }

// WorkersDir returns the directory of the worker processes' logs.
func (d Dir) WorkersDir() string { return d.File(Workers) }

// WorkerLog returns the stderr log of worker process `process` in slot `slot`
// (both as the run numbers them: slots from 1): workers/wSLOT-pPROCESS.stderr.log.
func (d Dir) WorkerLog(slot, process int) string {
	return filepath.Join(d.WorkersDir(), fmt.Sprintf("w%d-p%d.stderr.log", slot, process))
}

// Has reports whether the run has the regular file name.
func (d Dir) Has(name string) bool {
	st, err := os.Stat(d.File(name))
	return err == nil && st.Mode().IsRegular()
}

// Stamp is the name of the run directory of a run started at t.
func Stamp(t time.Time) string { return t.UTC().Format(StampLayout) }

// ParseStamp returns the start time a run directory's name says.
func ParseStamp(name string) (time.Time, error) { return time.Parse(StampLayout, name) }

// Create makes the run directory STORE/TEST/STAMP of a run started at now and points
// STORE/latest and STORE/TEST/latest at it (a link that cannot be made is no error:
// the links are a convenience). A directory is never shared: when STAMP is taken (two
// runs started in the same millisecond: explore's lanes), the next free millisecond
// is the run's.
func Create(store, test string, now time.Time) (Dir, error) {
	if err := os.MkdirAll(filepath.Join(store, test), 0o755); err != nil {
		return "", fmt.Errorf("create run directory: %w", err)
	}
	for {
		stamp := Stamp(now)
		dir := filepath.Join(store, test, stamp)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			now = now.Add(time.Millisecond)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create run directory: %w", err)
		}
		_ = pointLatest(store, test, stamp, true)
		return Dir(dir), nil
	}
}

// pointLatest points STORE/TEST/latest at stamp and, with both, STORE/latest too.
func pointLatest(store, test, stamp string, both bool) error {
	links := []struct{ at, to string }{{filepath.Join(store, test, Latest), stamp}}
	if both {
		links = append(links, struct{ at, to string }{filepath.Join(store, Latest), filepath.Join(test, stamp)})
	}
	var errs []error
	for _, l := range links {
		_ = os.Remove(l.at)
		errs = append(errs, os.Symlink(l.to, l.at))
	}
	return errors.Join(errs...)
}

// Open returns the run directory at path (a `latest` link is followed, the path kept
// as given). A run directory holds a config.json, a history.jsonl or a results.json;
// anything else is an error saying so.
func Open(path string) (Dir, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	d := Dir(path)
	if !st.IsDir() || !(d.Has(Config) || d.Has(History) || d.Has(Results)) {
		return "", fmt.Errorf("%s is not a run directory (no %s, %s or %s)", path, Config, History, Results)
	}
	return d, nil
}

// Store returns the store the run directory is in (STORE of STORE/TEST/STAMP), the
// path resolved (a `latest` link followed) and absolute.
func (d Dir) Store() (string, error) {
	abs, err := filepath.Abs(string(d))
	if err != nil {
		return "", err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(abs)), nil
}

// ReadConfig decodes config.json into v strictly: a field v does not have is an
// error, which names the file, the line and the field.
func (d Dir) ReadConfig(v any) error {
	path := d.File(Config)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, errorWithLine(data, err))
	}
	return nil
}

// ReadResults decodes results.json into v (leniently: results.json is written by
// every version of the tool, and read for what it says of the run). The error names
// the file.
func (d Dir) ReadResults(v any) error {
	path := d.File(Results)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// WriteJSON writes v into the run's file name as indented JSON and a newline.
func (d Dir) WriteJSON(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(d.File(name), append(data, '\n'), 0o644)
}

// errorWithLine adds the line of a JSON error to it: a syntax or type error's own
// offset, or for an unknown field the first key of that name in the file.
func errorWithLine(data []byte, err error) error {
	offset := int64(-1)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	default:
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			if name, uerr := strconv.Unquote(name); uerr == nil {
				offset = keyOffset(data, name)
			}
		}
	}
	if offset < 0 {
		return err
	}
	line := 1 + bytes.Count(data[:min(int(offset), len(data))], []byte("\n"))
	return fmt.Errorf("line %d: %w", line, err)
}

// keyOffset returns the offset just past the first object key called name in data,
// or -1.
func keyOffset(data []byte, name string) int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	// Each open container's kind: true for an object, whose next string may be a key.
	var objects []bool
	key := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return -1
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				objects = append(objects, t == '{')
				key = t == '{'
				continue
			default: // a closed container is a value: in an object, a key comes next
				objects = objects[:len(objects)-1]
				key = len(objects) > 0 && objects[len(objects)-1]
				continue
			}
		case string:
			if key && t == name {
				return dec.InputOffset()
			}
		}
		// After a key comes its value; after a value, in an object, the next key.
		key = len(objects) > 0 && objects[len(objects)-1] && !key
	}
}

// Entry is a run found under a store by List.
type Entry struct {
	// ID is the run directory relative to the store, slash-separated.
	ID string
	// Stamp is the run directory's name (its start time, see ParseStamp).
	Stamp string
}

// matrixStampLayout names a safety matrix's directory: its start time, to the second
// (a matrix is not a run: it holds matrix.json and matrix.md, its runs are stored as
// runs).
const matrixStampLayout = "20060102T150405Z"

// ExploreDir is where `zlockcheck explore` keeps a session's own files (its rounds are
// stored as runs): STORE/explore/STAMP, holding the servers' directories of the
// ensemble every round ran on (Servers) and the session's summary (Session).
func ExploreDir(store string, now time.Time) string {
	return filepath.Join(store, "explore", now.UTC().Format(matrixStampLayout))
}

// Session is an explore session's summary in its ExploreDir.
const Session = "session.json"

// MatrixDir is where `zlockcheck matrix` keeps its tables unless told otherwise:
// STORE/matrix/STAMP for a matrix started at now.
func MatrixDir(store string, now time.Time) string {
	return filepath.Join(store, "matrix", now.UTC().Format(matrixStampLayout))
}
