package histories

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// This file holds the hand-rolled JSON encoder for ops. Its output is byte for byte
// what encoding/json's Marshal produces for an Op (HTML-safe escaping, compacted Value),
// which the tests check; it is several times faster and allocates nothing.

const hexDigits = "0123456789abcdef"

// jsonSafe[b] is true for the ASCII bytes encoding/json writes unescaped in a string.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range []byte{'"', '\\', '<', '>', '&'} {
		t[b] = false
	}
	return t
}()

// appendJSONString appends s as a JSON string, escaped as encoding/json escapes it:
// quotes, backslashes and control characters, <, > and & (as \u003c and so on),
// U+2028 and U+2029; each byte of invalid UTF-8 becomes \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendCompactJSON appends the JSON text v compacted (no insignificant whitespace)
// and HTML-escaped, as encoding/json writes a json.RawMessage. It fails if v is not
// one valid JSON value.
func appendCompactJSON(dst, v []byte) ([]byte, error) {
	end, err := skipJSONValue(v, skipJSONSpace(v, 0), 0)
	if err == nil {
		if end = skipJSONSpace(v, end); end != len(v) {
			err = syntaxErrorAt(v, end, "after the value")
		}
	}
	if err != nil {
		return dst, fmt.Errorf("value is not valid JSON: offset %d: %v", err.pos, err)
	}
	// Fast path: nothing to strip or escape.
	clean := true
	for _, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			clean = false
		}
		if !clean {
			break
		}
	}
	if clean {
		return append(dst, v...), nil
	}
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			continue
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8:
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[v[i+2]&0xF])
			i += 2
			continue
		}
		if inString {
			switch c {
			case '\\':
				dst = append(dst, c, v[i+1])
				i++
				continue
			case '"':
				inString = false
			}
		} else {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inString = true
			}
		}
		dst = append(dst, c)
	}
	return dst, nil
}

// AppendJSON appends op as one line of a history file, without the newline: the JSON
// object encoding/json would write for op, with Value compacted. It fails only if
// op.Value is not empty and not valid JSON.
func (op Op) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, op.Index, 10)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, string(op.Type))
	dst = append(dst, `,"f":`...)
	dst = appendJSONString(dst, op.F)
	dst = append(dst, `,"process":`...)
	if op.Process.Nemesis {
		dst = append(dst, `"nemesis"`...)
	} else {
		dst = strconv.AppendInt(dst, int64(op.Process.ID), 10)
	}
	dst = append(dst, `,"time":`...)
	dst = strconv.AppendInt(dst, op.Time, 10)
	if op.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = appendJSONString(dst, op.Key)
	}
	if op.Mode != "" {
		dst = append(dst, `,"mode":`...)
		dst = appendJSONString(dst, op.Mode)
	}
	if len(op.Value) != 0 {
		dst = append(dst, `,"value":`...)
		var err error
		if dst, err = appendCompactJSON(dst, op.Value); err != nil {
			return dst, err
		}
	}
	if op.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = appendJSONString(dst, op.Error)
	}
	if op.Lost {
		dst = append(dst, `,"lost":true`...)
	}
	return append(dst, '}'), nil
}

// WriteJSONL writes h as a history file, one op per line as AppendJSON renders it,
// keeping the ops' indexes. It checks nothing but that Values are JSON; see Validate.
func WriteJSONL(w io.Writer, h History) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	for i := range h {
		var err error
		if line, err = h[i].AppendJSON(line[:0]); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
