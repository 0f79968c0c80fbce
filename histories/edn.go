package histories

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a small, general EDN reader, enough for Jepsen histories: nil, booleans,
// integers (with N), floats (with M), ratios, ##Inf/##-Inf/##NaN, strings, characters,
// keywords, symbols, lists, vectors, maps, sets, tagged values (#inst "...": the tag is
// kept for rendering only), #_ discards, ; comments, and commas as whitespace.

// ednKind is the type of an EDN value.
type ednKind uint8

const (
	ednNil ednKind = iota
	ednBool
	ednInt      // text: decimal digits with optional sign, as written (maybe with N)
	ednFloat    // text: as written (maybe with M)
	ednRatio    // text: as written
	ednSymbolic // text: ##Inf, ##-Inf or ##NaN
	ednString   // text: the decoded contents
	ednChar     // text: the character
	ednKeyword  // text: the name, without the colon
	ednSymbol   // text: the name
	ednList
	ednVector
	ednSet
	ednMap // items: key, value, key, value...
)

// ednValue is one EDN value and the line it starts on.
type ednValue struct {
	kind  ednKind
	line  int
	text  string
	tag   string // the #tag it was read with, if any
	items []ednValue
}

// maxEDNDepth bounds nesting, so that hostile input cannot exhaust the stack.
const maxEDNDepth = 10000

// ednParser reads EDN from src.
type ednParser struct {
	src   []byte
	pos   int
	line  int
	name  string
	field string // the op field whose value is being read, for errors
}

func (p *ednParser) errorf(line int, format string, args ...any) *ParseError {
	return &ParseError{File: p.name, Line: line, Field: p.field, Msg: fmt.Sprintf(format, args...)}
}

func isEDNSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '\f', '\v':
		return true
	}
	return false
}

// isEDNDelim reports whether c ends a token.
func isEDNDelim(c byte) bool {
	switch c {
	case '"', ';', '(', ')', '[', ']', '{', '}', '\\':
		return true
	}
	return isEDNSpace(c)
}

// skip skips whitespace, comments and #_ discarded forms.
func (p *ednParser) skip(depth int) error {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == '\n':
			p.line++
			p.pos++
		case isEDNSpace(c):
			p.pos++
		case c == ';' || c == '#' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '!':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == '#' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '_':
			p.pos += 2
			if _, err := p.value(depth + 1); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

// value reads the next value; the caller has skipped what precedes it.
func (p *ednParser) value(depth int) (ednValue, error) {
	if depth > maxEDNDepth {
		return ednValue{}, p.errorf(p.line, "nested too deeply")
	}
	if err := p.skip(depth); err != nil {
		return ednValue{}, err
	}
	if p.pos >= len(p.src) {
		return ednValue{}, p.errorf(p.line, "unexpected end of input")
	}
	line := p.line
	switch c := p.src[p.pos]; c {
	case '"':
		s, err := p.str()
		return ednValue{kind: ednString, line: line, text: s}, err
	case '(':
		p.pos++
		items, err := p.seq(')', line, depth)
		return ednValue{kind: ednList, line: line, items: items}, err
	case '[':
		p.pos++
		items, err := p.seq(']', line, depth)
		return ednValue{kind: ednVector, line: line, items: items}, err
	case '{':
		p.pos++
		items, err := p.seq('}', line, depth)
		if err == nil && len(items)%2 != 0 {
			err = p.errorf(line, "map has an odd number of forms")
		}
		return ednValue{kind: ednMap, line: line, items: items}, err
	case ')', ']', '}':
		return ednValue{}, p.errorf(line, "unexpected %q", c)
	case '\\':
		return p.char()
	case '#':
		return p.dispatch(depth)
	}
	return p.token()
}

// seq reads values up to the closing delimiter.
func (p *ednParser) seq(closer byte, line, depth int) ([]ednValue, error) {
	var items []ednValue
	for {
		if err := p.skip(depth); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) {
			return nil, p.errorf(p.line, "unexpected end of input: %q opened on line %d is not closed", openerOf(closer), line)
		}
		if p.src[p.pos] == closer {
			p.pos++
			return items, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
	}
}

func openerOf(closer byte) byte {
	switch closer {
	case ')':
		return '('
	case ']':
		return '['
	}
	return '{'
}

// dispatch reads what follows a '#': a set, a symbolic value or a tagged value.
func (p *ednParser) dispatch(depth int) (ednValue, error) {
	line := p.line
	p.pos++
	if p.pos >= len(p.src) {
		return ednValue{}, p.errorf(line, "unexpected end of input after #")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		p.pos++
		items, err := p.seq('}', line, depth)
		return ednValue{kind: ednSet, line: line, items: items}, err
	case c == '#':
		p.pos++
		tok := p.tokenText()
		switch tok {
		case "Inf", "-Inf", "NaN":
			return ednValue{kind: ednSymbolic, line: line, text: "##" + tok}, nil
		}
		return ednValue{}, p.errorf(line, "unknown symbolic value ##%s", tok)
	case c < utf8.RuneSelf && unicode.IsLetter(rune(c)):
		tag := p.tokenText()
		if !validSymbol(tag) {
			return ednValue{}, p.errorf(line, "invalid tag #%s", tag)
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return v, err
		}
		if v.tag != "" {
			tag += " #" + v.tag // renders as #outer #inner value
		}
		v.tag = tag
		v.line = line
		return v, nil
	}
	return ednValue{}, p.errorf(line, "unsupported dispatch #%c", p.src[p.pos])
}

// tokenText reads up to the next delimiter.
func (p *ednParser) tokenText() string {
	start := p.pos
	for p.pos < len(p.src) && !isEDNDelim(p.src[p.pos]) {
		p.pos++
	}
	return validUTF8(string(p.src[start:p.pos]))
}

// token reads a number, nil, true, false, a keyword or a symbol.
func (p *ednParser) token() (ednValue, error) {
	line := p.line
	tok := p.tokenText()
	switch {
	case tok == "":
		return ednValue{}, p.errorf(line, "unexpected %q", p.src[p.pos])
	case tok == "nil":
		return ednValue{kind: ednNil, line: line}, nil
	case tok == "true" || tok == "false":
		return ednValue{kind: ednBool, line: line, text: tok}, nil
	case isDigit(tok[0]) || len(tok) > 1 && (tok[0] == '+' || tok[0] == '-') && isDigit(tok[1]):
		kind, ok := classifyNumber(tok)
		if !ok {
			return ednValue{}, p.errorf(line, "invalid number %s", tok)
		}
		return ednValue{kind: kind, line: line, text: tok}, nil
	case tok[0] == ':':
		name := tok[1:]
		if !validSymbol(name) {
			return ednValue{}, p.errorf(line, "invalid keyword %s", tok)
		}
		return ednValue{kind: ednKeyword, line: line, text: name}, nil
	}
	if !validSymbol(tok) {
		return ednValue{}, p.errorf(line, "invalid symbol %s", tok)
	}
	return ednValue{kind: ednSymbol, line: line, text: tok}, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// validSymbol reports whether s is a plausible symbol or keyword name: not empty, not
// starting with a digit, ':' or '#', made of letters, digits and .*+!-_?$%&=<>/:#'.
func validSymbol(s string) bool {
	if s == "" || isDigit(s[0]) || s[0] == ':' || s[0] == '#' {
		return false
	}
	if len(s) > 1 && (s[0] == '-' || s[0] == '+' || s[0] == '.') && isDigit(s[1]) {
		return false
	}
	for _, r := range s {
		if r >= utf8.RuneSelf {
			if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
				return false
			}
			continue
		}
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".*+!-_?$%&=<>/:#'", r)) {
			return false
		}
	}
	return true
}

// classifyNumber tells an integer, float or ratio literal, in EDN's grammar: optional
// sign, no leading zeros, N on integers, M on floats.
func classifyNumber(s string) (ednKind, bool) {
	i := 0
	if s[i] == '+' || s[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return i - start
	}
	start := i
	n := digits()
	if n == 0 || n > 1 && s[start] == '0' {
		return 0, false
	}
	if i == len(s) || s[i:] == "N" {
		return ednInt, true
	}
	if s[i] == '/' {
		i++
		if digits() == 0 || i != len(s) {
			return 0, false
		}
		return ednRatio, true
	}
	if s[i] == '.' {
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(s) && s[i] == 'M' {
		i++
	}
	if i != len(s) {
		return 0, false
	}
	return ednFloat, true
}

// numberJSON renders an integer or float literal as a JSON number.
func numberJSON(v ednValue) string {
	s := strings.TrimPrefix(v.text, "+")
	s = strings.TrimSuffix(strings.TrimSuffix(s, "N"), "M")
	if i := strings.IndexByte(s, '.'); i >= 0 && (i+1 == len(s) || !isDigit(s[i+1])) {
		s = s[:i+1] + "0" + s[i+1:]
	}
	return s
}

var charNames = map[string]string{
	"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b", "formfeed": "\f",
}

// char reads a character literal.
func (p *ednParser) char() (ednValue, error) {
	line := p.line
	p.pos++ // the backslash
	if p.pos >= len(p.src) {
		return ednValue{}, p.errorf(line, "unexpected end of input in character literal")
	}
	// The first character is taken whatever it is; letters may follow for names.
	_, size := utf8.DecodeRune(p.src[p.pos:])
	start := p.pos
	p.pos += size
	for p.pos < len(p.src) && !isEDNDelim(p.src[p.pos]) {
		p.pos++
	}
	tok := string(p.src[start:p.pos])
	if tok == "\n" {
		p.line++
	}
	if r, n := utf8.DecodeRuneInString(tok); n == len(tok) && (r != utf8.RuneError || n > 1) {
		return ednValue{kind: ednChar, line: line, text: tok}, nil
	}
	if s, ok := charNames[tok]; ok {
		return ednValue{kind: ednChar, line: line, text: s}, nil
	}
	if len(tok) == 5 && tok[0] == 'u' {
		if r, err := strconv.ParseUint(tok[1:], 16, 16); err == nil && !utf16.IsSurrogate(rune(r)) {
			return ednValue{kind: ednChar, line: line, text: string(rune(r))}, nil
		}
	}
	return ednValue{}, p.errorf(line, "invalid character literal \\%s", validUTF8(tok))
}

// str reads a string literal; invalid UTF-8 and unpaired surrogates become U+FFFD.
func (p *ednParser) str() (string, error) {
	line := p.line
	p.pos++
	var b []byte
	start := p.pos
	for {
		if p.pos >= len(p.src) {
			return "", p.errorf(line, "unexpected end of input in string starting on line %d", line)
		}
		c := p.src[p.pos]
		switch c {
		case '"':
			b = append(b, p.src[start:p.pos]...)
			p.pos++
			return validUTF8(string(b)), nil
		case '\n':
			p.line++
		case '\\':
			b = append(b, p.src[start:p.pos]...)
			p.pos++
			if p.pos >= len(p.src) {
				return "", p.errorf(line, "unexpected end of input in string starting on line %d", line)
			}
			e := p.src[p.pos]
			p.pos++
			switch e {
			case 't':
				b = append(b, '\t')
			case 'r':
				b = append(b, '\r')
			case 'n':
				b = append(b, '\n')
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case '\\', '"', '\'':
				b = append(b, e)
			case 'u':
				r := p.hex4()
				if r < 0 {
					return "", p.errorf(p.line, `invalid \u escape in string`)
				}
				if utf16.IsSurrogate(r) {
					save := p.pos
					if p.pos+1 < len(p.src) && p.src[p.pos] == '\\' && p.src[p.pos+1] == 'u' {
						p.pos += 2
						if dec := utf16.DecodeRune(r, p.hex4()); dec != unicode.ReplacementChar {
							b = utf8.AppendRune(b, dec)
							break
						}
					}
					p.pos = save
					r = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.errorf(p.line, "invalid escape \\%c in string", e)
			}
			start = p.pos
			continue
		}
		p.pos++
	}
}

// hex4 reads four hex digits, or returns -1 and reads nothing.
func (p *ednParser) hex4() rune {
	if p.pos+4 > len(p.src) {
		return -1
	}
	var r rune
	for _, c := range p.src[p.pos : p.pos+4] {
		h := unhex(c)
		if h < 0 {
			return -1
		}
		r = r<<4 | h
	}
	p.pos += 4
	return r
}

// validUTF8 replaces each byte of invalid UTF-8 in s with U+FFFD, as decoding JSON does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b = utf8.AppendRune(b, r)
		i += size
	}
	return string(b)
}

// renderEDN appends v as EDN text: maps as {k v, k v}, other collections with single
// spaces, strings and characters escaped.
func renderEDN(dst []byte, v ednValue) []byte {
	if v.tag != "" {
		dst = append(dst, '#')
		dst = append(dst, v.tag...)
		dst = append(dst, ' ')
	}
	switch v.kind {
	case ednNil:
		return append(dst, "nil"...)
	case ednBool, ednInt, ednFloat, ednRatio, ednSymbolic, ednSymbol:
		return append(dst, v.text...)
	case ednKeyword:
		return append(append(dst, ':'), v.text...)
	case ednString:
		return appendEDNString(dst, v.text)
	case ednChar:
		for name, s := range charNames {
			if s == v.text {
				return append(append(dst, '\\'), name...)
			}
		}
		if r, _ := utf8.DecodeRuneInString(v.text); r < 0x20 || r == 0x7f {
			return fmt.Appendf(dst, `\u%04x`, r)
		}
		return append(append(dst, '\\'), v.text...)
	case ednMap:
		dst = append(dst, '{')
		for i := 0; i < len(v.items); i += 2 {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = renderEDN(dst, v.items[i])
			dst = append(dst, ' ')
			dst = renderEDN(dst, v.items[i+1])
		}
		return append(dst, '}')
	}
	open, closer := "(", byte(')')
	switch v.kind {
	case ednVector:
		open, closer = "[", ']'
	case ednSet:
		open, closer = "#{", '}'
	}
	dst = append(dst, open...)
	for i, it := range v.items {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = renderEDN(dst, it)
	}
	return append(dst, closer)
}

// appendEDNString appends s as an EDN string literal.
func appendEDNString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s { // invalid UTF-8 comes out as U+FFFD
		switch r {
		case '"', '\\':
			dst = append(dst, '\\', byte(r))
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			if r < 0x20 || r == 0x7f {
				dst = fmt.Appendf(dst, `\u%04x`, r)
			} else {
				dst = utf8.AppendRune(dst, r)
			}
		}
	}
	return append(dst, '"')
}

// ednText is the text a value stands for as a map key or an op's string field:
// a keyword's or symbol's name, a string's contents, an integer's digits, or else
// the value rendered as EDN.
func ednText(v ednValue) string {
	switch v.kind {
	case ednKeyword, ednSymbol, ednString, ednChar:
		if v.tag == "" {
			return v.text
		}
	case ednInt:
		if v.tag == "" {
			return numberJSON(v)
		}
	}
	return string(renderEDN(nil, v))
}

// appendEDNAsJSON appends v converted to JSON: nil is null, numbers stay numbers,
// keywords, symbols, characters, ratios and ##Inf become strings, sequences and sets
// arrays, maps objects (keys as by ednText). Tags are dropped.
func appendEDNAsJSON(dst []byte, v ednValue) []byte {
	switch v.kind {
	case ednNil:
		return append(dst, "null"...)
	case ednBool:
		return append(dst, v.text...)
	case ednInt, ednFloat:
		return append(dst, numberJSON(v)...)
	case ednRatio, ednSymbolic, ednString, ednChar, ednKeyword, ednSymbol:
		return appendJSONString(dst, v.text)
	case ednMap:
		dst = append(dst, '{')
		for i := 0; i < len(v.items); i += 2 {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, ednText(v.items[i]))
			dst = append(dst, ':')
			dst = appendEDNAsJSON(dst, v.items[i+1])
		}
		return append(dst, '}')
	}
	dst = append(dst, '[')
	for i, it := range v.items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendEDNAsJSON(dst, it)
	}
	return append(dst, ']')
}
