package histories

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
)

// LoadEDN reads the Jepsen history in EDN at path; see ReadEDN.
func LoadEDN(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadEDN(f, path)
}

// ReadEDN reads a Jepsen history in EDN from r; name is the file name used in errors.
//
// The input is a vector or list of op maps, or the maps one after another, such as
// {:type :invoke, :f :acquire, :process 3, :time 371408519, :index 2}. :type is one
// of :invoke, :ok, :fail, :info; :f a keyword or string; :process an integer or
// :nemesis; :time an integer >= 0. :index is optional: an op without one gets its
// position. :value becomes JSON (keywords, symbols and ratios as strings, sets and
// lists as arrays); :error, :key and :mode become strings (a keyword's name, or
// anything else rendered as EDN); :lost is a boolean. A nil field counts as absent
// (except :value nil, which is JSON null); other keys are ignored.
//
// Ops stay in file order; times need not increase. The pairing rules of Validate
// apply. Errors are *ParseError naming the line and the field (":type").
func ReadEDN(r io.Reader, name string) (History, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &ednParser{src: src, line: 1, name: name}
	var h History
	t := Pairer{unit: "line"}
	next := func() error {
		v, err := p.opMap(1)
		if err != nil {
			return err
		}
		op, err := p.op(v, len(h))
		if err != nil {
			return err
		}
		if _, e := t.Step(&op, v.line); e != nil {
			return &ParseError{File: name, Line: v.line, Field: ":" + e.Field, Msg: e.Msg}
		}
		h = append(h, op)
		return nil
	}
	if err := p.skip(0); err != nil {
		return nil, err
	}
	if p.pos == len(src) {
		return h, nil
	}
	if c := src[p.pos]; c == '[' || c == '(' {
		closer := byte(']')
		if c == '(' {
			closer = ')'
		}
		line := p.line
		p.pos++
		for {
			if err := p.skip(0); err != nil {
				return nil, err
			}
			if p.pos >= len(src) {
				return nil, p.errorf(p.line, "unexpected end of input: %q opened on line %d is not closed", c, line)
			}
			if src[p.pos] == closer {
				p.pos++
				break
			}
			if err := next(); err != nil {
				return nil, err
			}
		}
		if err := p.skip(0); err != nil {
			return nil, err
		}
		if p.pos < len(src) {
			return nil, p.errorf(p.line, "unexpected data after the history's closing %q", closer)
		}
		return h, nil
	}
	for {
		if err := p.skip(0); err != nil {
			return nil, err
		}
		if p.pos >= len(src) {
			return h, nil
		}
		if err := next(); err != nil {
			return nil, err
		}
	}
}

// opMap reads an op's map, possibly tagged (#jepsen.history.Op{...}), noting the field
// whose value is being read for errors.
func (p *ednParser) opMap(depth int) (ednValue, error) {
	if err := p.skip(depth); err != nil {
		return ednValue{}, err
	}
	line := p.line
	if p.pos+1 < len(p.src) && p.src[p.pos] == '#' && p.src[p.pos+1] != '{' && p.src[p.pos+1] != '#' {
		p.pos++
		tag := p.tokenText()
		if !validSymbol(tag) {
			return ednValue{}, p.errorf(line, "invalid tag #%s", tag)
		}
		return p.opMap(depth + 1)
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		v, err := p.value(depth)
		if err != nil {
			return v, err
		}
		return v, p.errorf(v.line, "an op must be a map, got %s", abbrev(renderEDN(nil, v)))
	}
	p.pos++
	var items []ednValue
	for {
		if err := p.skip(depth); err != nil {
			return ednValue{}, err
		}
		if p.pos >= len(p.src) {
			return ednValue{}, p.errorf(p.line, "unexpected end of input: '{' opened on line %d is not closed", line)
		}
		if p.src[p.pos] == '}' {
			p.pos++
			return ednValue{kind: ednMap, line: line, items: items}, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return k, err
		}
		if k.kind == ednKeyword {
			p.field = ":" + k.text
		}
		if err := p.skip(depth); err != nil {
			return ednValue{}, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			return ednValue{}, p.errorf(p.line, "key without a value")
		}
		v, err := p.value(depth + 1)
		p.field = ""
		if err != nil {
			return v, err
		}
		items = append(items, k, v)
	}
}

// op converts an op's map, the pos'th op of the file, to an Op.
func (p *ednParser) op(m ednValue, pos int) (Op, error) {
	var op Op
	var hasType, hasProcess, hasTime, hasIndex bool
	for i := 0; i < len(m.items); i += 2 {
		k, v := m.items[i], m.items[i+1]
		if k.kind != ednKeyword || v.kind == ednNil && k.text != "value" {
			continue
		}
		fld := ":" + k.text
		bad := func(format string, args ...any) error {
			return &ParseError{File: p.name, Line: v.line, Field: fld, Msg: fmt.Sprintf(format, args...)}
		}
		shown := func() string { return abbrev(renderEDN(nil, v)) }
		switch k.text {
		case "type":
			if v.kind != ednKeyword && v.kind != ednString {
				return op, bad("must be a keyword, got %s", shown())
			}
			t, ok := typeOf([]byte(v.text))
			if !ok {
				return op, bad("unknown type %s", shown())
			}
			op.Type, hasType = t, true
		case "f":
			if v.kind != ednKeyword && v.kind != ednString && v.kind != ednSymbol {
				return op, bad("must be a keyword or string, got %s", shown())
			}
			op.F = v.text
		case "process":
			switch {
			case v.kind == ednKeyword && v.text == "nemesis":
				op.Process = NemesisProcess
			case v.kind == ednInt:
				n, err := strconv.ParseInt(numberJSON(v), 10, 0)
				if err != nil {
					return op, bad("must be an integer or :nemesis, got %s", shown())
				}
				op.Process = Client(int(n))
			default:
				return op, bad("must be an integer or :nemesis, got %s", shown())
			}
			hasProcess = true
		case "time", "index":
			if v.kind != ednInt {
				return op, bad("must be an integer, got %s", shown())
			}
			n, err := strconv.ParseInt(numberJSON(v), 10, 64)
			if err != nil {
				return op, bad("must be an integer in range, got %s", shown())
			}
			if n < 0 {
				return op, bad("must be >= 0, got %s", shown())
			}
			if k.text == "time" {
				op.Time, hasTime = n, true
			} else {
				op.Index, hasIndex = n, true
			}
		case "key":
			op.Key = ednText(v)
		case "mode":
			op.Mode = ednText(v)
		case "error":
			op.Error = ednText(v)
		case "value":
			op.Value = appendEDNAsJSON(nil, v)
		case "lost":
			if v.kind != ednBool {
				return op, bad("must be true or false, got %s", shown())
			}
			op.Lost = v.text == "true"
		}
	}
	missing := func(fld string) error {
		return &ParseError{File: p.name, Line: m.line, Field: fld, Msg: "missing"}
	}
	switch {
	case !hasType:
		return op, missing(":type")
	case op.F == "":
		return op, &ParseError{File: p.name, Line: m.line, Field: ":f", Msg: "missing or empty"}
	case !hasProcess:
		return op, missing(":process")
	case !hasTime:
		return op, missing(":time")
	}
	if !hasIndex {
		op.Index = int64(pos)
	}
	return op, nil
}

// WriteEDN writes h as a Jepsen history: a vector of op maps, one per line, like
// {:type :ok, :f :acquire, :process 3, :time 1303460468, :value 7, :index 27}.
// Types, functions, errors and modes are keywords where they can be, strings
// otherwise; keys are strings; Values are converted from JSON (objects become maps
// with keyword keys where they can be, arrays vectors). ReadEDN reads the output back
// into an equal history (with Values equal as JSON). It fails if a Value is not JSON.
func WriteEDN(w io.Writer, h History) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := []byte{'['}
	for i := range h {
		if i > 0 {
			buf = append(buf, '\n')
		}
		var err error
		if buf, err = appendOpEDN(buf, &h[i]); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
		if len(buf) >= 32<<10 {
			if _, err := bw.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, "]\n"...)
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	return bw.Flush()
}

func appendOpEDN(dst []byte, op *Op) ([]byte, error) {
	dst = append(dst, "{:type "...)
	dst = appendKeywordOrString(dst, string(op.Type))
	dst = append(dst, ", :f "...)
	dst = appendKeywordOrString(dst, op.F)
	dst = append(dst, ", :process "...)
	if op.Process.Nemesis {
		dst = append(dst, ":nemesis"...)
	} else {
		dst = strconv.AppendInt(dst, int64(op.Process.ID), 10)
	}
	dst = append(dst, ", :time "...)
	dst = strconv.AppendInt(dst, op.Time, 10)
	if op.Key != "" {
		dst = append(dst, ", :key "...)
		dst = appendEDNString(dst, op.Key)
	}
	if op.Mode != "" {
		dst = append(dst, ", :mode "...)
		dst = appendKeywordOrString(dst, op.Mode)
	}
	if len(op.Value) != 0 {
		dst = append(dst, ", :value "...)
		var err error
		if dst, err = appendJSONAsEDN(dst, op.Value); err != nil {
			return dst, err
		}
	}
	if op.Error != "" {
		dst = append(dst, ", :error "...)
		dst = appendKeywordOrString(dst, op.Error)
	}
	if op.Lost {
		dst = append(dst, ", :lost true"...)
	}
	dst = append(dst, ", :index "...)
	dst = strconv.AppendInt(dst, op.Index, 10)
	return append(dst, '}'), nil
}

// plainKeyword reports whether :s is a keyword every EDN reader reads back as s.
func plainKeyword(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '*', c == '!', c == '_', c == '?',
			c == '$', c == '%', c == '&', c == '=', c == '<', c == '>':
		case i > 0 && (isDigit(c) || c == '+' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

func appendKeywordOrString(dst []byte, s string) []byte {
	if plainKeyword(s) {
		return append(append(dst, ':'), s...)
	}
	return appendEDNString(dst, s)
}

// appendJSONAsEDN appends the JSON value v as EDN: objects as maps (keys as keywords
// where they can be), arrays as vectors, null as nil.
func appendJSONAsEDN(dst []byte, v json.RawMessage) ([]byte, error) {
	end, err := skipJSONValue(v, skipJSONSpace(v, 0), 0)
	if err == nil && skipJSONSpace(v, end) != len(v) {
		err = syntaxErrorAt(v, skipJSONSpace(v, end), "after the value")
	}
	if err != nil {
		return dst, fmt.Errorf("value is not valid JSON: offset %d: %v", err.pos, err)
	}
	dst, _ = jsonToEDN(dst, v, 0)
	return dst, nil
}

// jsonToEDN converts the valid JSON value at b[i].
func jsonToEDN(dst, b []byte, i int) ([]byte, int) {
	i = skipJSONSpace(b, i)
	switch c := b[i]; c {
	case '{', '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		dst = append(dst, c)
		i = skipJSONSpace(b, i+1)
		for n := 0; b[i] != closer; n++ {
			if n > 0 {
				if c == '{' {
					dst = append(dst, ", "...)
				} else {
					dst = append(dst, ' ')
				}
			}
			if c == '{' {
				end, _, _ := scanJSONString(b, i)
				dst = appendKeywordOrString(dst, string(appendUnquoted(nil, b[i+1:end-1])))
				dst = append(dst, ' ')
				i = skipJSONSpace(b, end) + 1 // past the colon
			}
			dst, i = jsonToEDN(dst, b, i)
			if i = skipJSONSpace(b, i); b[i] == ',' {
				i = skipJSONSpace(b, i+1)
			}
		}
		return append(dst, closer), i + 1
	case '"':
		end, _, _ := scanJSONString(b, i)
		return appendEDNString(dst, string(appendUnquoted(nil, b[i+1:end-1]))), end
	case 't':
		return append(dst, "true"...), i + 4
	case 'f':
		return append(dst, "false"...), i + 5
	case 'n':
		return append(dst, "nil"...), i + 4
	}
	end, _, _ := scanJSONNumber(b, i)
	return append(dst, b[i:end]...), end
}
