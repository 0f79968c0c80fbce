package histories

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxLineLength bounds one line of a history file; longer lines are an error rather
// than an attempt to hold them in memory. A variable so that tests can lower it.
var maxLineLength = 64 << 20

// Load reads the history file at path; see Read.
func Load(path string) (History, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	return read(f, path, size)
}

// Read reads a history in JSON Lines from r; name is the file name used in messages.
//
// Blank lines are skipped and unknown fields ignored. A last line that has no newline
// and is not valid JSON is what a run killed in mid-write leaves: it is dropped with a
// warning ("name:line: ..."), the only kind of warning. Any other malformed line, and
// any op that breaks the rules Validate checks, is a *ParseError naming the line and
// the field; then the history is nil. An op without "index" gets its position.
func Read(r io.Reader, name string) (History, []string, error) {
	var size int64
	if l, ok := r.(interface{ Len() int }); ok { // bytes.Reader, strings.Reader, bytes.Buffer
		size = int64(l.Len())
	}
	return read(r, name, size)
}

// bytesPerOp is a guess at the size of a line, to size the history up front.
const bytesPerOp = 80

func read(r io.Reader, name string, size int64) (History, []string, error) {
	bufSize := 256 << 10
	if size > 0 && size < int64(bufSize) {
		bufSize = max(int(size)+1, 4096)
	}
	br := bufio.NewReaderSize(r, bufSize)
	d := newLineDecoder()
	var h History
	if size > 0 {
		h = make(History, 0, min(size/bytesPerOp+16, 1<<24))
	}
	var warnings []string
	t := Pairer{unit: "line"}
	var long []byte
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(long) > maxLineLength {
					return nil, warnings, &ParseError{File: name, Line: lineNo, Msg: fmt.Sprintf("line longer than %d bytes", maxLineLength)}
				}
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return nil, warnings, fmt.Errorf("%s:%d: %w", name, lineNo, err)
		}
		if len(line) > maxLineLength {
			return nil, warnings, &ParseError{File: name, Line: lineNo, Msg: fmt.Sprintf("line longer than %d bytes", maxLineLength)}
		}
		complete := err == nil
		if complete {
			line = line[:len(line)-1]
		}
		if skipJSONSpace(line, 0) < len(line) {
			h = append(h, Op{})
			op := &h[len(h)-1]
			hasIndex, le := d.decode(line, op)
			if le != nil {
				h = h[:len(h)-1]
				if !complete && le.syntax {
					warnings = append(warnings, fmt.Sprintf("%s:%d: dropped the truncated last line (%d bytes, no newline): %s", name, lineNo, len(line), le.msg))
					return h, warnings, nil
				}
				return nil, warnings, &ParseError{File: name, Line: lineNo, Field: le.field, Msg: le.msg}
			}
			if !hasIndex {
				op.Index = int64(len(h) - 1)
			}
			if _, e := t.Step(op, lineNo); e != nil {
				return nil, warnings, &ParseError{File: name, Line: lineNo, Field: e.Field, Msg: e.Msg}
			}
		}
		if !complete {
			return h, warnings, nil
		}
	}
}
