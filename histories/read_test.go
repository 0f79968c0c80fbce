package histories

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestLoadSample(t *testing.T) {
	h, warnings, err := Load("testdata/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	if len(h) != 13 {
		t.Fatalf("%d ops, want 13", len(h))
	}
	want := map[int]Op{
		0:  {Index: 0, Type: Invoke, F: FAcquire, Process: Client(0), Time: 1000, Key: "l0", Value: json.RawMessage("null")},
		3:  {Index: 3, Type: Info, F: "start", Process: NemesisProcess, Time: 2500, Value: json.RawMessage(`{"partition":[["n1","n2"],["n3"]]}`)},
		5:  {Index: 5, Type: Info, F: FAcquire, Process: Client(1), Time: 3100, Key: "l0", Error: `connection loss: "n3" unreachable`},
		6:  {Index: 6, Type: OK, F: FRelease, Process: Client(0), Time: 3200, Key: "l0", Value: json.RawMessage("null")},
		10: {Index: 10, Type: Invoke, F: FRelease, Process: Client(2), Time: 3600, Key: "l0", Mode: ModeWrite},
		11: {Index: 11, Type: OK, F: FRelease, Process: Client(2), Time: 3700, Key: "l0", Mode: ModeWrite, Lost: true},
		12: {Index: 12, Type: Invoke, F: FAcquire, Process: Client(0), Time: 3800, Key: "lé\t<1>", Value: json.RawMessage("null")},
	}
	for i, op := range want {
		if d := diffHistories(History{op}, History{h[i]}, false); d != "" {
			t.Errorf("op %d: %s", i, d)
		}
	}
	if err := Validate(h); err != nil {
		t.Error(err)
	}
}

func TestReadValid(t *testing.T) {
	tests := []struct {
		name, in string
		want     History
	}{
		{"empty", "", nil},
		{"blank lines only", "\n  \n\t\r\n", nil},
		{"no final newline", `{"type":"invoke","f":"acquire","process":1,"time":5}`,
			History{{Type: Invoke, F: FAcquire, Process: Client(1), Time: 5}}},
		{"crlf", "{\"type\":\"invoke\",\"f\":\"a\",\"process\":1,\"time\":5}\r\n{\"type\":\"ok\",\"f\":\"a\",\"process\":1,\"time\":6}\r\n",
			History{{Type: Invoke, F: "a", Process: Client(1), Time: 5}, {Index: 1, Type: OK, F: "a", Process: Client(1), Time: 6}}},
		{"missing index is position", "\n{\"type\":\"info\",\"f\":\"x\",\"process\":\"nemesis\",\"time\":5}\n\n{\"type\":\"info\",\"f\":\"x\",\"process\":\"nemesis\",\"time\":1}\n",
			History{{Type: Info, F: "x", Process: NemesisProcess, Time: 5}, {Index: 1, Type: Info, F: "x", Process: NemesisProcess, Time: 1}}},
		{"index kept, time not monotone",
			`{"index":5,"type":"invoke","f":"a","process":1,"time":50}` + "\n" + `{"index":3,"type":"fail","f":"a","process":1,"time":40,"error":"e"}`,
			History{{Index: 5, Type: Invoke, F: "a", Process: Client(1), Time: 50}, {Index: 3, Type: Fail, F: "a", Process: Client(1), Time: 40, Error: "e"}}},
		{"nemesis exempt from pairing",
			`{"type":"ok","f":"a","process":"nemesis","time":1}` + "\n" + `{"type":"invoke","f":"b","process":"nemesis","time":2}` + "\n" + `{"type":"invoke","f":"b","process":"nemesis","time":3}`,
			History{{Type: OK, F: "a", Process: NemesisProcess, Time: 1}, {Index: 1, Type: Invoke, F: "b", Process: NemesisProcess, Time: 2}, {Index: 2, Type: Invoke, F: "b", Process: NemesisProcess, Time: 3}}},
		{"unknown fields of every type",
			`{"a":{"b":[1,{"c":"}]"}],"d":null},"e":[[],{}],"f":"x","g":-0.5e-7,"h":true,"i":false,"j":null,"type":"invoke","process":7,"time":0,"\"weird key\\u0041\"":"\\"}`,
			History{{Type: Invoke, F: "x", Process: Client(7)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, warnings, err := Read(strings.NewReader(tt.in), "t.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != 0 {
				t.Errorf("warnings: %q", warnings)
			}
			if d := diffHistories(tt.want, h, false); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestReadMalformed(t *testing.T) {
	const (
		inv  = `{"index":0,"type":"invoke","f":"acquire","process":1,"time":10}`
		ok   = `{"index":1,"type":"ok","f":"acquire","process":1,"time":20}`
		info = `{"index":1,"type":"info","f":"acquire","process":1,"time":20}`
	)
	tests := []struct {
		name  string
		in    string
		line  int
		field string
		frags []string
	}{
		{"unknown type", inv + "\n" + `{"index":1,"type":"okk","f":"acquire","process":1,"time":20}` + "\n", 2, "type", []string{`unknown type "okk"`}},
		{"type not a string", `{"type":1,"f":"a","process":1,"time":2}` + "\n", 1, "type", []string{"must be a string, got a number"}},
		{"type missing", `{"f":"a","process":1,"time":2}` + "\n", 1, "type", []string{"missing"}},
		{"type null", `{"type":null,"f":"a","process":1,"time":2}` + "\n", 1, "type", []string{"missing"}},
		{"f missing", `{"type":"invoke","process":1,"time":2}` + "\n", 1, "f", []string{"missing"}},
		{"f empty", "\n\n" + `{"type":"invoke","f":"","process":1,"time":2}` + "\n", 3, "f", []string{"empty"}},
		{"f not a string", `{"type":"invoke","f":["a"],"process":1,"time":2}` + "\n", 1, "f", []string{"must be a string, got an array"}},
		{"process missing", `{"type":"invoke","f":"a","time":2}` + "\n", 1, "process", []string{"missing"}},
		{"process other string", `{"type":"invoke","f":"a","process":"client","time":2}` + "\n", 1, "process", []string{`"client"`}},
		{"process float", `{"type":"invoke","f":"a","process":1.5,"time":2}` + "\n", 1, "process", []string{"1.5"}},
		{"process null", `{"type":"invoke","f":"a","process":null,"time":2}` + "\n", 1, "process", []string{"got null"}},
		{"process object", `{"type":"invoke","f":"a","process":{},"time":2}` + "\n", 1, "process", []string{"got an object"}},
		{"time missing", `{"type":"invoke","f":"a","process":1}` + "\n", 1, "time", []string{"missing"}},
		{"time negative", `{"type":"invoke","f":"a","process":1,"time":-3}` + "\n", 1, "time", []string{">= 0", "-3"}},
		{"time float", `{"type":"invoke","f":"a","process":1,"time":3.0}` + "\n", 1, "time", []string{"must be an integer", "3.0"}},
		{"time exponent", `{"type":"invoke","f":"a","process":1,"time":3e9}` + "\n", 1, "time", []string{"must be an integer"}},
		{"time string", `{"type":"invoke","f":"a","process":1,"time":"3"}` + "\n", 1, "time", []string{"got a string"}},
		{"time overflow", `{"type":"invoke","f":"a","process":1,"time":9223372036854775808}` + "\n", 1, "time", []string{"must be an integer"}},
		{"index negative", `{"index":-1,"type":"invoke","f":"a","process":1,"time":3}` + "\n", 1, "index", []string{">= 0"}},
		{"index bool", `{"index":true,"type":"invoke","f":"a","process":1,"time":3}` + "\n", 1, "index", []string{"got a boolean"}},
		{"lost not bool", `{"type":"invoke","f":"a","process":1,"time":3,"lost":1}` + "\n", 1, "lost", []string{"must be a boolean"}},
		{"key not string", `{"type":"invoke","f":"a","process":1,"time":3,"key":1}` + "\n", 1, "key", []string{"must be a string"}},
		{"mode not string", `{"type":"invoke","f":"a","process":1,"time":3,"mode":true}` + "\n", 1, "mode", []string{"must be a string"}},
		{"error not string", `{"type":"invoke","f":"a","process":1,"time":3,"error":{"a":1}}` + "\n", 1, "error", []string{"must be a string"}},
		{"bad value", `{"type":"invoke","f":"a","process":1,"time":3,"value":{"a":}}` + "\n", 1, "value", []string{"column 60", "invalid character '}'"}},
		{"bad unknown field", `{"type":"invoke","f":"a","process":1,"time":3,"extra":[1,]}` + "\n", 1, "extra", []string{"invalid character ']'"}},
		{"bad literal", `{"type":"invoke","f":"a","process":1,"time":3,"lost":tru}` + "\n", 1, "lost", []string{"in literal true"}},
		{"control char in string", "{\"type\":\"invoke\",\"f\":\"a\tb\",\"process\":1,\"time\":3}\n", 1, "f", []string{"in string literal"}},
		{"bad escape", `{"type":"invoke","f":"a\qb","process":1,"time":3}` + "\n", 1, "f", []string{"escape"}},
		{"bad unicode escape", `{"type":"invoke","f":"a\u12g4","process":1,"time":3}` + "\n", 1, "f", []string{`\u`}},
		{"too deep", `{"type":"invoke","f":"a","process":1,"time":3,"deep":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "}\n", 1, "deep", []string{"max depth"}},
		{"not an object", inv + "\n[1,2]\n", 2, "", []string{"must be a JSON object, got an array"}},
		{"not JSON", "hello\n", 1, "", []string{"invalid character 'h'"}},
		{"trailing data", inv + " {}\n", 1, "", []string{"after the op object"}},
		{"missing colon", `{"type" "invoke"}` + "\n", 1, "type", []string{"after object key"}},
		{"unquoted key", `{type:"invoke"}` + "\n", 1, "", []string{"object key string"}},
		{"missing comma", `{"type":"invoke" "f":"a"}` + "\n", 1, "", []string{"after object key:value pair"}},
		{"truncated line not last", inv[:30] + "\n" + inv + "\n", 1, "f", []string{"unexpected end of input"}},
		{"bad last line with newline", inv + "\n" + ok[:30] + "\n", 2, "f", []string{"unexpected end of input"}},
		{"valid JSON last line without newline is not truncated", inv + "\n" + `{"type":"ok"}`, 2, "f", []string{"missing"}},
		{"completion without invoke", inv + "\n" + ok + "\n" + ok + "\n", 3, "process", []string{"process 1", "no open invoke"}},
		{"completion without invoke at start", ok + "\n", 1, "process", []string{"process 1", "no open invoke"}},
		{"second invoke", inv + "\n" + inv + "\n", 2, "process", []string{"process 1", "still open", "line 1"}},
		{"reuse after info", "\n" + inv + "\n" + info + "\n" + inv + "\n", 4, "process", []string{"process 1", "info completion on line 3"}},
		{"completion f mismatch", inv + "\n" + `{"type":"ok","f":"release","process":1,"time":20}` + "\n", 2, "f", []string{`"release"`, `"acquire"`, "line 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, err := Read(strings.NewReader(tt.in), "history.jsonl")
			if h != nil {
				t.Errorf("history %v returned with the error", h)
			}
			wantParseError(t, err, "history.jsonl", tt.line, tt.field, tt.frags...)
		})
	}
}

func TestParseErrorFormat(t *testing.T) {
	_, _, err := Read(strings.NewReader("\n"+`{"index":12,"type":"okk","f":"acquire","process":3,"time":5}`), "history.jsonl")
	if got, want := fmt.Sprint(err), `history.jsonl:2: field "type": unknown type "okk"`; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	for _, tt := range []struct {
		e    ParseError
		want string
	}{
		{ParseError{"a.edn", 3, ":type", "unknown type :okk"}, "a.edn:3: field :type: unknown type :okk"},
		{ParseError{"a.jsonl", 4, "", "boom"}, "a.jsonl:4: boom"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%q, want %q", got, tt.want)
		}
	}
}

func TestTruncatedLastLine(t *testing.T) {
	h, warnings, err := Load("testdata/truncated.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || len(warnings) != 1 || !strings.HasPrefix(warnings[0], "testdata/truncated.jsonl:3: ") {
		t.Errorf("%d ops, warnings %q; want 2 ops and a warning for line 3", len(h), warnings)
	}

	// Cut a generated history at every offset of its last line.
	full := genHistory(200, 1)
	data := encodeJSONL(t, full)
	lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	for cut := lastStart; cut <= len(data); cut++ {
		path := writeFile(t, "h.jsonl", data[:cut])
		h, warnings, err := Load(path)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		want := full[:len(full)-1]
		wantWarnings := 1
		if cut == lastStart {
			wantWarnings = 0 // the last line is simply absent
		}
		if cut >= len(data)-1 {
			want, wantWarnings = full, 0 // complete, with or without its newline
		}
		if d := diffHistories(want, h, false); d != "" {
			t.Fatalf("cut at %d: %s", cut, d)
		}
		if len(warnings) != wantWarnings {
			t.Fatalf("cut at %d: warnings %q", cut, warnings)
		}
		if wantWarnings == 1 && !strings.HasPrefix(warnings[0], fmt.Sprintf("%s:%d: ", path, len(full))) {
			t.Fatalf("cut at %d: warning %q does not name %s:%d", cut, warnings[0], path, len(full))
		}
	}
}

func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	in := `{"type":"invoke","f":"a","process":1,"time":3,"value":"` + long + `","key":"k"}` + "\n" +
		`{"type":"ok","f":"a","process":1,"time":4,"key":"k","error":"` + long + `"}` + "\n"
	h, _, err := Read(strings.NewReader(in), "long.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || len(h[0].Value) != len(long)+2 || h[0].Key != "k" || h[1].Error != long {
		t.Errorf("long lines misread")
	}

	defer func(n int) { maxLineLength = n }(maxLineLength)
	maxLineLength = 1 << 20
	for _, in := range []string{in, in[:len(in)-1], "\n" + long[:maxLineLength+1]} {
		_, _, err = Read(strings.NewReader(in), "long.jsonl")
		wantParseError(t, err, "long.jsonl", 1+strings.Count(in[:1], "\n"), "", "longer than")
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, _, err := Load("testdata/no-such-file.jsonl"); !os.IsNotExist(err) {
		t.Errorf("error %v, want not-exist", err)
	}
}

func TestValidate(t *testing.T) {
	inv := Op{Type: Invoke, F: FAcquire, Process: Client(1), Time: 1}
	ok := Op{Type: OK, F: FAcquire, Process: Client(1), Time: 2}
	info := Op{Type: Info, F: FAcquire, Process: Client(1), Time: 2}
	nem := Op{Type: Info, F: "start", Process: NemesisProcess, Time: 0}
	tests := []struct {
		name  string
		h     History
		pos   int // -1: valid
		field string
		frag  string
	}{
		{"empty", nil, -1, "", ""},
		{"valid", History{inv, nem, ok, inv, info, nem}, -1, "", ""},
		{"bad type", History{{Type: "okk", F: "a", Process: Client(1)}}, 0, "type", `unknown type "okk"`},
		{"empty f", History{{Type: Invoke, Process: Client(1)}}, 0, "f", "empty"},
		{"negative time", History{nem, {Type: Invoke, F: "a", Time: -1}}, 1, "time", ">= 0"},
		{"negative index", History{{Index: -2, Type: Invoke, F: "a"}}, 0, "index", ">= 0"},
		{"bad value", History{{Type: Invoke, F: "a", Value: json.RawMessage("{")}}, 0, "value", "JSON"},
		{"completion without invoke", History{ok}, 0, "process", "no open invoke"},
		{"double invoke", History{inv, nem, inv}, 2, "process", "invoked on op 0 is still open"},
		{"reuse after info", History{inv, info, inv}, 2, "process", "info completion on op 1"},
		{"f mismatch", History{inv, {Type: Fail, F: FRelease, Process: Client(1)}}, 1, "f", "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.h)
			if tt.pos < 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			ve, ok := err.(*ValidationError)
			if !ok {
				t.Fatalf("error %v, want a *ValidationError", err)
			}
			if ve.Pos != tt.pos || ve.Field != tt.field || !strings.Contains(ve.Msg, tt.frag) {
				t.Errorf("error %q, want op %d field %q mentioning %q", err, tt.pos, tt.field, tt.frag)
			}
			if want := fmt.Sprintf("op %d: field %q: ", tt.pos, tt.field); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
	if err := Validate(genHistory(5000, 3)); err != nil {
		t.Errorf("generated history: %v", err)
	}
}

func TestReadGenerated(t *testing.T) {
	h := genHistory(20000, 7)
	got, warnings, err := Read(bytes.NewReader(encodeJSONL(t, h)), "gen.jsonl")
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	if d := diffHistories(h, got, false); d != "" {
		t.Fatal(d)
	}
}
