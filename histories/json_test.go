package histories

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// trickyStrings need escaping, or are invalid UTF-8, or are otherwise awkward.
var trickyStrings = []string{
	"", "acquire", `quote " and backslash \`, "new\nline\ttab\rcr\bbs\fff", "\x00\x01\x1f\x7f",
	"<html>&amp;</html>", "line\u2028sep\u2029par", "héllo wörld ✓ 𝄞", "bad \xff utf8 \xe2\x82", "\xed\xa0\x80",
	"nemesis", "/slash/", "\ufffd", "emoji 😀",
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	values := []string{``, `null`, `7`, `-0.5e10`, `"s"`, `true`, `{"a":[1,2,{"b":null}]}`,
		` { "a" : [ 1 , "x y" ] } `, `"<&>"`, "\"\u2028\"", `{"k":"tab\there"}`, "[\n1,\n2\n]", `"\u00e9"`}
	var ops []Op
	for _, s := range trickyStrings {
		ops = append(ops,
			Op{Index: 1, Type: OK, F: s, Process: Client(3), Time: 5},
			Op{Type: Type(s), F: "f", Process: NemesisProcess, Key: s, Mode: s, Error: s},
		)
	}
	for i, v := range values {
		ops = append(ops, Op{Index: int64(i), Type: Info, F: "x", Process: Client(-i), Time: 1 << 62, Value: json.RawMessage(v), Lost: i%2 == 0})
	}
	ops = append(ops, Op{Index: -1, Process: Client(-1 << 40), Time: -1 << 63})
	for _, op := range ops {
		got, err := op.AppendJSON(nil)
		if err != nil {
			t.Fatalf("%+v: %v", op, err)
		}
		want, err := json.Marshal(op)
		if err != nil {
			t.Fatalf("%+v: %v", op, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("AppendJSON(%+v)\n got %s\nwant %s", op, got, want)
		}
		// And encoding/json reads it back.
		var back Op
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		var d lineDecoder
		d.intern = map[string]string{}
		var mine Op
		if _, le := d.decode(got, &mine); le != nil && op.Type.Valid() && op.F != "" && op.Time >= 0 && op.Index >= 0 {
			t.Errorf("decode(%s): %+v", got, le)
		} else if le == nil && !reflect.DeepEqual(mine, back) {
			t.Errorf("decode(%s)\n got %+v\nwant %+v", got, mine, back)
		}
	}
}

func TestAppendJSONRejectsBadValue(t *testing.T) {
	for _, v := range []string{`{`, `nul`, `1 2`, `"a`, ` `, `{"a":1,}`, `01`} {
		op := Op{Type: OK, F: "f", Value: json.RawMessage(v)}
		if _, err := op.AppendJSON(nil); err == nil {
			t.Errorf("value %q accepted", v)
		}
		if _, err := json.Marshal(op); err == nil {
			t.Errorf("encoding/json accepts value %q", v)
		}
	}
}

// genJSONValue generates JSON text, sometimes with insignificant whitespace.
func genJSONValue(t *rapid.T, depth int) string {
	kinds := 6
	if depth > 2 {
		kinds = 4
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return "null"
	case 1:
		return rapid.SampledFrom([]string{"0", "-1", "42", "3.25", "1e9", "-0.5E-3", "12345678901234567890123"}).Draw(t, "num")
	case 2:
		b, _ := json.Marshal(genString(t, "s"))
		return string(b)
	case 3:
		return rapid.SampledFrom([]string{"true", "false"}).Draw(t, "bool")
	case 4:
		n := rapid.IntRange(0, 3).Draw(t, "n")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = genJSONValue(t, depth+1)
		}
		return "[" + strings.Join(parts, rapid.SampledFrom([]string{",", " , ", ",\n"}).Draw(t, "sep")) + "]"
	default:
		n := rapid.IntRange(0, 3).Draw(t, "n")
		parts := make([]string, n)
		for i := range parts {
			k, _ := json.Marshal(genString(t, "k"))
			parts[i] = string(k) + ":" + genJSONValue(t, depth+1)
		}
		return "{ " + strings.Join(parts, ",") + " }"
	}
}

// genString generates mostly short names, sometimes tricky or random strings.
func genString(t *rapid.T, label string) string {
	switch rapid.IntRange(0, 3).Draw(t, label+"-kind") {
	case 0:
		return rapid.SampledFrom([]string{"acquire", "release", "l0", "not-held", "timeout"}).Draw(t, label)
	case 1:
		return rapid.SampledFrom(trickyStrings).Draw(t, label)
	default:
		return rapid.String().Draw(t, label)
	}
}

func TestAppendJSONProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		op := Op{
			Index: rapid.Int64().Draw(t, "index"),
			Type:  Type(genString(t, "type")),
			F:     genString(t, "f"),
			Time:  rapid.Int64().Draw(t, "time"),
			Key:   genString(t, "key"),
			Mode:  genString(t, "mode"),
			Error: genString(t, "error"),
			Lost:  rapid.Bool().Draw(t, "lost"),
		}
		if rapid.Bool().Draw(t, "nemesis") {
			op.Process = NemesisProcess
		} else {
			op.Process = Client(rapid.Int().Draw(t, "process"))
		}
		if rapid.Bool().Draw(t, "hasValue") {
			op.Value = json.RawMessage(genJSONValue(t, 0))
		}
		got, err := op.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	lines := []string{
		`{"index":7,"type":"ok","f":"acquire","process":3,"time":1234567,"key":"l0","value":null}`,
		`{"index":0,"type":"invoke","f":"acquire","process":"nemesis","time":0}`,
		` { "time" : 5 , "process" : -2 , "f" : "x\u0041\n\"" , "type" : "info" , "index" : 9 } `,
		`{"index":1,"type":"fail","f":"release","process":0,"time":9,"error":"not-held","lost":false,"extra":{"a":[1,{"b":"}"}]},"more":[[]],"n":-1.5e3}`,
		`{"index":1,"type":"ok","f":"release","process":0,"time":9,"value":{ "a" : [1, 2] },"lost":true}`,
		`{"index":1,"TYPE":"ok","F":"f","Process":1,"tImE":2,"\u212aey":"kelvin","proceſs":4}`,
		`{"index":1,"type":"ok","f":"f","process":1,"time":2,"type":"fail","f":null,"key":"k","key":null}`,
		`{"index":1,"type":"ok","f":"a\ud83d\ude00b\ud800c\udc00\ud800\u0041","process":1,"time":2,"key":"bad ` + "\xff" + ` utf8"}`,
		`{"ind\u0065x":3,"type":"ok","f":"f","process":1,"time":2,"value":"\u2028<>"}`,
		`{"index":1,"type":"ok","f":"f","process":1,"time":2,"value":1,"value":[true,false,null]}`,
		`{"index":9223372036854775807,"type":"ok","f":"f","process":-9223372036854775808,"time":0}`,
	}
	d := newLineDecoder()
	for _, line := range lines {
		var mine, theirs Op
		if _, le := d.decode([]byte(line), &mine); le != nil {
			t.Errorf("decode(%s): %+v", line, le)
			continue
		}
		if err := json.Unmarshal([]byte(line), &theirs); err != nil {
			t.Fatalf("encoding/json rejects %s: %v", line, err)
		}
		if !reflect.DeepEqual(mine, theirs) {
			t.Errorf("decode(%s)\n got %+v\nwant %+v", line, mine, theirs)
		}
	}
}
