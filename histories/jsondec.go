package histories

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the hand-rolled decoder for history lines. For every line it accepts
// it produces the Op encoding/json's Unmarshal would (the tests and FuzzRead check
// this), except that a missing "index" becomes the op's position; it rejects some lines
// Unmarshal would take, such as ops with no "time".

// maxJSONDepth bounds nesting, as encoding/json does.
const maxJSONDepth = 10000

// jsonSyntaxError is a place where a line stops being valid JSON.
type jsonSyntaxError struct {
	pos int // byte offset of the offending character, len(input) at the end
	msg string
}

func (e *jsonSyntaxError) Error() string { return e.msg }

func syntaxErrorAt(b []byte, i int, context string) *jsonSyntaxError {
	if i >= len(b) {
		return &jsonSyntaxError{pos: len(b), msg: "unexpected end of input " + context}
	}
	return &jsonSyntaxError{pos: i, msg: "invalid character " + quoteByte(b[i]) + " " + context}
}

func quoteByte(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c >= 0x20 && c < 0x7f:
		return "'" + string(c) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Flags scanJSONString reports about a string's contents.
const (
	strEscaped  = 1 << iota // contains a backslash escape
	strNonASCII             // contains bytes >= 0x80
)

// scanJSONString checks the string literal starting at b[i] (a '"') and returns the
// offset just past its closing quote.
func scanJSONString(b []byte, i int) (end int, flags int, err *jsonSyntaxError) {
	i++
	for {
		// The common run of plain ASCII.
		for i < len(b) {
			c := b[i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		if i >= len(b) {
			return i, flags, syntaxErrorAt(b, i, "in string literal")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, flags, nil
		case c == '\\':
			flags |= strEscaped
			i++
			if i >= len(b) {
				return i, flags, syntaxErrorAt(b, i, "in string escape code")
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(b) || unhex(b[i]) < 0 {
						return i, flags, syntaxErrorAt(b, i, `in \u hexadecimal character escape`)
					}
					i++
				}
			default:
				return i, flags, syntaxErrorAt(b, i, "in string escape code")
			}
		case c < 0x20:
			return i, flags, syntaxErrorAt(b, i, "in string literal")
		default:
			flags |= strNonASCII
			i++
		}
	}
}

func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		h := unhex(c)
		if h < 0 {
			return -1
		}
		r = r<<4 | h
	}
	return r
}

// appendUnquoted appends the contents s of a scanned JSON string literal (without the
// quotes) decoded as encoding/json decodes it: invalid UTF-8 bytes and unpaired
// surrogates become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						dst = utf8.AppendRune(dst, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // " \ /
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			dst = utf8.AppendRune(dst, rr)
		}
	}
	return dst
}

// scanJSONNumber checks the number starting at b[i] and returns the offset past it and
// whether it is an integer (no fraction or exponent).
func scanJSONNumber(b []byte, i int) (end int, isInt bool, err *jsonSyntaxError) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	default:
		return i, false, syntaxErrorAt(b, i, "in numeric literal")
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		isInt = false
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false, syntaxErrorAt(b, i, "after decimal point in numeric literal")
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false, syntaxErrorAt(b, i, "in exponent of numeric literal")
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	return i, isInt, nil
}

// parseJSONInt parses an integer literal as scanned by scanJSONNumber.
func parseJSONInt(b []byte) (int64, bool) {
	neg := false
	if b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// skipJSONValue checks the value starting at b[i] and returns the offset past it.
func skipJSONValue(b []byte, i, depth int) (int, *jsonSyntaxError) {
	if i >= len(b) {
		return i, syntaxErrorAt(b, i, "looking for beginning of value")
	}
	switch c := b[i]; c {
	case '{', '[':
		if depth >= maxJSONDepth {
			return i, &jsonSyntaxError{pos: i, msg: "exceeded max depth"}
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipJSONSpace(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1, nil
		}
		for {
			var err *jsonSyntaxError
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return i, syntaxErrorAt(b, i, "looking for beginning of object key string")
				}
				if i, _, err = scanJSONString(b, i); err != nil {
					return i, err
				}
				i = skipJSONSpace(b, i)
				if i >= len(b) || b[i] != ':' {
					return i, syntaxErrorAt(b, i, "after object key")
				}
				i = skipJSONSpace(b, i+1)
			}
			if i, err = skipJSONValue(b, i, depth+1); err != nil {
				return i, err
			}
			i = skipJSONSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipJSONSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == closer {
				return i + 1, nil
			}
			if c == '{' {
				return i, syntaxErrorAt(b, i, "after object key:value pair")
			}
			return i, syntaxErrorAt(b, i, "after array element")
		}
	case '"':
		end, _, err := scanJSONString(b, i)
		return end, err
	case 't':
		return skipJSONLiteral(b, i, "true")
	case 'f':
		return skipJSONLiteral(b, i, "false")
	case 'n':
		return skipJSONLiteral(b, i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			end, _, err := scanJSONNumber(b, i)
			return end, err
		}
		return i, syntaxErrorAt(b, i, "looking for beginning of value")
	}
}

func skipJSONLiteral(b []byte, i int, lit string) (int, *jsonSyntaxError) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return i + k, syntaxErrorAt(b, i+k, "in literal "+lit+" (expecting '"+lit[k:k+1]+"')")
		}
	}
	return i + len(lit), nil
}

// jsonKind names the JSON type of the (valid) value starting with c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// field identifies a key of an op line.
type field uint8

const (
	fUnknown field = iota
	fIndex
	fType
	fF
	fProcess
	fTime
	fKey
	fMode
	fValue
	fError
	fLost
)

var fieldNames = [...]string{"", "index", "type", "f", "process", "time", "key", "mode", "value", "error", "lost"}

// fieldOf maps a decoded key to its field the way encoding/json does: exactly, or else
// case-insensitively (with Unicode simple folding).
func fieldOf(key []byte) field {
	switch string(key) {
	case "index":
		return fIndex
	case "type":
		return fType
	case "f":
		return fF
	case "process":
		return fProcess
	case "time":
		return fTime
	case "key":
		return fKey
	case "mode":
		return fMode
	case "value":
		return fValue
	case "error":
		return fError
	case "lost":
		return fLost
	}
	for f := fIndex; f <= fLost; f++ {
		if bytes.EqualFold(key, []byte(fieldNames[f])) {
			return f
		}
	}
	return fUnknown
}

// lineError is why one line was rejected.
type lineError struct {
	field  string // the key being decoded, or ""
	msg    string
	syntax bool // the line is not valid JSON, as opposed to valid JSON that is no op
}

// lineDecoder decodes lines into ops. It interns short strings (function names, keys,
// errors repeat on almost every line) and packs Values into shared slabs, so that a
// typical line costs no allocation of its own.
type lineDecoder struct {
	intern  map[string]string
	slab    []byte
	scratch []byte
}

func newLineDecoder() *lineDecoder {
	return &lineDecoder{intern: make(map[string]string)}
}

const (
	maxInternLen  = 64
	maxInterned   = 1 << 14
	slabSize      = 64 << 10
	maxSlabbedLen = 1 << 10
)

func (d *lineDecoder) str(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.intern) < maxInterned {
		d.intern[s] = s
	}
	return s
}

func (d *lineDecoder) raw(b []byte) json.RawMessage {
	if len(b) > maxSlabbedLen {
		return append(json.RawMessage(nil), b...)
	}
	if cap(d.slab)-len(d.slab) < len(b) {
		d.slab = make([]byte, 0, slabSize)
	}
	start := len(d.slab)
	d.slab = append(d.slab, b...)
	return d.slab[start:len(d.slab):len(d.slab)]
}

// stringAt decodes the string literal at b[i] (a '"'); the result is valid until the
// next call.
func (d *lineDecoder) stringAt(b []byte, i int) (s []byte, end int, err *jsonSyntaxError) {
	end, flags, err := scanJSONString(b, i)
	if err != nil {
		return nil, end, err
	}
	s = b[i+1 : end-1]
	if flags&strEscaped != 0 || flags&strNonASCII != 0 && !utf8.Valid(s) {
		d.scratch = appendUnquoted(d.scratch[:0], s)
		s = d.scratch
	}
	return s, end, nil
}

// Bits of lineDecoder.decode's record of the fields seen.
const (
	seenIndex = 1 << iota
	seenType
	seenF
	seenProcess
	seenTime
)

func syntaxLineError(fld string, e *jsonSyntaxError) *lineError {
	return &lineError{field: fld, msg: fmt.Sprintf("column %d: %s", e.pos+1, e.msg), syntax: true}
}

// decode decodes one non-blank line into op. It reports whether the line had an index.
func (d *lineDecoder) decode(b []byte, op *Op) (hasIndex bool, le *lineError) {
	*op = Op{}
	i := skipJSONSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		if _, err := skipJSONValue(b, i, 0); err != nil {
			return false, syntaxLineError("", err)
		}
		return false, &lineError{msg: fmt.Sprintf("an op must be a JSON object, got %s", jsonKind(b[i]))}
	}
	seen := 0
	i = skipJSONSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return false, syntaxLineError("", syntaxErrorAt(b, i, "looking for beginning of object key string"))
			}
			key, end, err := d.stringAt(b, i)
			if err != nil {
				return false, syntaxLineError("", err)
			}
			f := fieldOf(key)
			name := fieldNames[f]
			if f == fUnknown {
				name = string(key)
			}
			i = skipJSONSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return false, syntaxLineError(name, syntaxErrorAt(b, i, "after object key"))
			}
			i = skipJSONSpace(b, i+1)
			if i, le = d.decodeField(b, i, f, name, op, &seen); le != nil {
				return false, le
			}
			i = skipJSONSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipJSONSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return false, syntaxLineError("", syntaxErrorAt(b, i, "after object key:value pair"))
		}
	}
	if i = skipJSONSpace(b, i); i < len(b) {
		return false, syntaxLineError("", syntaxErrorAt(b, i, "after the op object"))
	}
	switch {
	case seen&seenType == 0:
		return false, &lineError{field: "type", msg: "missing"}
	case seen&seenF == 0 || op.F == "":
		return false, &lineError{field: "f", msg: "missing or empty"}
	case seen&seenProcess == 0:
		return false, &lineError{field: "process", msg: "missing"}
	case seen&seenTime == 0:
		return false, &lineError{field: "time", msg: "missing"}
	}
	return seen&seenIndex != 0, nil
}

// decodeField decodes the value at b[i] of field f (named name) into op.
func (d *lineDecoder) decodeField(b []byte, i int, f field, name string, op *Op, seen *int) (int, *lineError) {
	if i >= len(b) {
		return i, syntaxLineError(name, syntaxErrorAt(b, i, "looking for beginning of value"))
	}
	c := b[i]
	// null leaves every field but process and value untouched, as with encoding/json.
	if c == 'n' && f != fProcess && f != fValue {
		end, err := skipJSONLiteral(b, i, "null")
		if err != nil {
			return end, syntaxLineError(name, err)
		}
		return end, nil
	}
	switch f {
	case fIndex, fTime:
		if c != '-' && (c < '0' || c > '9') {
			return d.wrongType(b, i, name, "an integer")
		}
		end, isInt, err := scanJSONNumber(b, i)
		if err != nil {
			return end, syntaxLineError(name, err)
		}
		n, ok := parseJSONInt(b[i:end])
		if !isInt || !ok {
			return end, &lineError{field: name, msg: "must be an integer, got " + abbrev(b[i:end])}
		}
		if n < 0 {
			return end, &lineError{field: name, msg: "must be >= 0, got " + abbrev(b[i:end])}
		}
		if f == fIndex {
			op.Index = n
			*seen |= seenIndex
		} else {
			op.Time = n
			*seen |= seenTime
		}
		return end, nil
	case fProcess:
		if c == '"' {
			end, _, err := scanJSONString(b, i)
			if err != nil {
				return end, syntaxLineError(name, err)
			}
			if string(b[i:end]) != `"nemesis"` {
				return end, &lineError{field: name, msg: `must be an integer or "nemesis", got ` + abbrev(b[i:end])}
			}
			op.Process = NemesisProcess
			*seen |= seenProcess
			return end, nil
		}
		if c != '-' && (c < '0' || c > '9') {
			return d.wrongType(b, i, name, `an integer or "nemesis"`)
		}
		end, isInt, err := scanJSONNumber(b, i)
		if err != nil {
			return end, syntaxLineError(name, err)
		}
		n, ok := parseJSONInt(b[i:end])
		if !isInt || !ok || int64(int(n)) != n {
			return end, &lineError{field: name, msg: `must be an integer or "nemesis", got ` + abbrev(b[i:end])}
		}
		op.Process = Client(int(n))
		*seen |= seenProcess
		return end, nil
	case fType, fF, fKey, fMode, fError:
		if c != '"' {
			return d.wrongType(b, i, name, "a string")
		}
		s, end, err := d.stringAt(b, i)
		if err != nil {
			return end, syntaxLineError(name, err)
		}
		switch f {
		case fType:
			t, ok := typeOf(s)
			if !ok {
				return end, &lineError{field: name, msg: "unknown type " + strconv.Quote(string(s))}
			}
			op.Type = t
			*seen |= seenType
		case fF:
			op.F = d.str(s)
			*seen |= seenF
		case fKey:
			op.Key = d.str(s)
		case fMode:
			op.Mode = d.str(s)
		case fError:
			op.Error = d.str(s)
		}
		return end, nil
	case fLost:
		switch c {
		case 't':
			end, err := skipJSONLiteral(b, i, "true")
			if err != nil {
				return end, syntaxLineError(name, err)
			}
			op.Lost = true
			return end, nil
		case 'f':
			end, err := skipJSONLiteral(b, i, "false")
			if err != nil {
				return end, syntaxLineError(name, err)
			}
			op.Lost = false
			return end, nil
		}
		return d.wrongType(b, i, name, "a boolean")
	case fValue:
		end, err := skipJSONValue(b, i, 0)
		if err != nil {
			return end, syntaxLineError(name, err)
		}
		op.Value = d.raw(b[i:end])
		return end, nil
	}
	end, err := skipJSONValue(b, i, 0)
	if err != nil {
		return end, syntaxLineError(name, err)
	}
	return end, nil
}

// wrongType reports a value of the wrong JSON type, or a syntax error if it is not
// valid JSON at all.
func (d *lineDecoder) wrongType(b []byte, i int, name, want string) (int, *lineError) {
	end, err := skipJSONValue(b, i, 0)
	if err != nil {
		return end, syntaxLineError(name, err)
	}
	return end, &lineError{field: name, msg: "must be " + want + ", got " + jsonKind(b[i])}
}

func typeOf(s []byte) (Type, bool) {
	switch string(s) {
	case "invoke":
		return Invoke, true
	case "ok":
		return OK, true
	case "fail":
		return Fail, true
	case "info":
		return Info, true
	}
	return "", false
}

// abbrev renders a value for an error message, shortened if long.
func abbrev(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
