package herd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Watch is one watch a server lists: a session and the path it watches.
type Watch struct {
	// Session is the session id as the server prints it (0x...).
	Session string
	Path    string
}

// ParseWchc parses a server's answer to wchc: each session (a line "0x...") followed
// by the paths it watches (one a line, indented by a tab). ZooKeeper 3.8 lists only
// its data watches there (getData and exists; wchp and wchs too): a getChildren watch
// is missing from all three, and counted only in mntr's zk_watch_count (data and
// child watches together). testdata/wchc-standalone.txt shows it: four sessions, one
// of them with a child watch on /zlc/run1/l0, and wchc lists two (Classify says how
// the child watches are counted). The error names the line that is neither.
func ParseWchc(text string) ([]Watch, error) {
	var out []Watch
	session := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "0x"):
			session = strings.TrimSpace(line)
		case strings.HasPrefix(line, "\t") && session != "":
			out = append(out, Watch{Session: session, Path: strings.TrimSpace(line)})
		default:
			return nil, fmt.Errorf("wchc line %d: %q is neither a session (0x...) nor a watched path under one", n, line)
		}
	}
	return out, sc.Err()
}

// ParseMntr parses a server's answer to mntr: one "name<TAB>value" a line. Only the
// integer values are kept (zk_version, zk_server_state and the averages are not).
func ParseMntr(text string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// ReadSamples decodes herd.jsonl: one Sample a line, in time order. A line that is
// not a sample is an error naming the line (and the field, for an unknown one); the
// caller adds the file's name.
func ReadSamples(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var s Sample
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if s.Lock == "" {
			return nil, fmt.Errorf("line %d: field lock: missing", n)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}
