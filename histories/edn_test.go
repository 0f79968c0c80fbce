package histories

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const knossosEtcd = "/work/shared/testdata/jepsen/knossos-mutex-bad-etcd.edn"

func TestLoadEDNKnossos(t *testing.T) {
	if _, err := os.Stat(knossosEtcd); err != nil {
		t.Skip(err)
	}
	h, err := LoadEDN(knossosEtcd)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1135 {
		t.Fatalf("%d ops, want 1135", len(h))
	}
	nemesis := 0
	for i, op := range h {
		if op.Index != int64(i) {
			t.Errorf("op %d has index %d", i, op.Index)
		}
		if op.Process.Nemesis {
			nemesis++
		}
	}
	if nemesis != 12 {
		t.Errorf("%d nemesis ops, want 12", nemesis)
	}
	want := History{
		{Index: 1, Type: Fail, F: FRelease, Process: Client(1), Time: 342667129, Error: "not-held"},
		{Index: 1118, Type: Info, F: "stop", Process: NemesisProcess, Time: 30332572215},
		{Index: 1120, Type: Fail, F: FRelease, Process: Client(3), Time: 32094782390, Error: `[:not-found "etcdserver: requested lease not found"]`},
	}
	if d := diffHistories(want, History{h[1], h[1118], h[1120]}, false); d != "" {
		t.Error(d)
	}
	// Completions earlier in time than ops before them are kept in file order.
	if h[4].Time <= h[5].Time {
		t.Errorf("expected the file's non-monotone times: %d, %d", h[4].Time, h[5].Time)
	}
	if err := Validate(h); err != nil {
		t.Error(err)
	}
	// EDN -> JSONL -> EDN.
	back, _, err := Read(bytes.NewReader(encodeJSONL(t, h)), "etcd.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var edn bytes.Buffer
	if err := WriteEDN(&edn, back); err != nil {
		t.Fatal(err)
	}
	again, err := ReadEDN(&edn, "etcd-again.edn")
	if err != nil {
		t.Fatal(err)
	}
	if d := diffHistories(h, again, false); d != "" {
		t.Error(d)
	}
}

func TestLoadEDNSample(t *testing.T) {
	h, err := LoadEDN("testdata/sample.edn")
	if err != nil {
		t.Fatal(err)
	}
	want := History{
		{Index: 0, Type: Invoke, F: FAcquire, Process: Client(0), Time: 1000, Value: json.RawMessage("null")},
		{Index: 1, Type: Invoke, F: FAcquire, Process: Client(1), Time: 900},
		{Index: 2, Type: OK, F: FAcquire, Process: Client(0), Time: 2000, Value: json.RawMessage("1")},
		{Index: 3, Type: Info, F: "start", Process: NemesisProcess, Time: 2500, Value: json.RawMessage(
			`{"partition":[["n1","n2"],["n3"]],"at":"2024-01-02T03:04:05Z","ratio":"1/3","big":12345678901234567890,` +
				`"float":2.5,"inf":"##Inf","char":"a","sym":"foo/bar","nested":{"[1 2]":true,"s":false,"3":null}}`)},
		{Index: 4, Type: Fail, F: FAcquire, Process: Client(1), Time: 3100, Error: `[:not-found "lease \"x\" gone\n"]`},
		{Index: 5, Type: Invoke, F: FRelease, Process: Client(0), Time: 3200, Key: "l0"},
		{Index: 6, Type: OK, F: FRelease, Process: Client(0), Time: 3300, Key: "l0", Mode: ModeWrite, Lost: true},
		{Index: 7, Type: Invoke, F: "read", Process: Client(1), Time: 3400, Value: json.RawMessage(`"café \t"`)},
		{Index: 8, Type: Info, F: "read", Process: Client(1), Time: 3500, Error: "timeout"},
	}
	if d := diffHistories(want, h, false); d != "" {
		t.Error(d)
	}
	for i := range want {
		if !bytes.Equal(want[i].Value, h[i].Value) {
			t.Errorf("op %d value %s, want %s", i, h[i].Value, want[i].Value)
		}
	}
}

func TestWriteEDNFormat(t *testing.T) {
	h, err := LoadEDN("testdata/rt.edn")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteEDN(&buf, h); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/rt.edn")
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(want) {
		t.Errorf("WriteEDN:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := WriteEDN(&buf, nil); err != nil || buf.String() != "[]\n" {
		t.Errorf("empty history: %q, %v", buf.String(), err)
	}
	if err := WriteEDN(&buf, History{{Type: OK, F: "f", Value: json.RawMessage("{")}}); err == nil {
		t.Error("WriteEDN accepted a bad value")
	}
}

func TestJSONLToEDNToJSONL(t *testing.T) {
	sample, _, err := Load("testdata/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]History{"sample": sample, "generated": genHistory(5000, 5)} {
		t.Run(name, func(t *testing.T) {
			var edn bytes.Buffer
			if err := WriteEDN(&edn, h); err != nil {
				t.Fatal(err)
			}
			fromEDN, err := ReadEDN(&edn, name+".edn")
			if err != nil {
				t.Fatal(err)
			}
			back, _, err := Read(bytes.NewReader(encodeJSONL(t, fromEDN)), name+".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			if d := diffHistories(h, back, true); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestReadEDNForms(t *testing.T) {
	op := func(extra string) string {
		return "{:type :info, :f :x, :process :nemesis, :time 1 " + extra + "}"
	}
	tests := []struct {
		name, in string
		values   []string // the ops' values as JSON ("" for none)
	}{
		{"empty", "", nil},
		{"empty vector", " [ ] ; nothing\n", nil},
		{"list", "(" + op(":value 1") + " " + op(":value -2") + ")", []string{"1", "-2"}},
		{"discard at top", "#_[1 2] " + op("") + " #_" + op(""), []string{""}},
		{"discard in vector", "[#_ #_ 1 2 " + op(":value [1 #_2 3]") + "]", []string{"[1,3]"}},
		{"shebang comment", "#!/usr/bin/env bb\n" + op(""), []string{""}},
		{"numbers", op(":value [+1 -0 0.5 1. 1e3 1.5E-2M 7N -3/4 ##-Inf ##NaN]"), []string{`[1,-0,0.5,1.0,1e3,1.5E-2,7,"-3/4","##-Inf","##NaN"]`}},
		{"strings", op(`:value ["a\"b\\c\n\t\r\b\f\u00e9\ud83d\ude00\ud800x" "multi` + "\n" + `line"]`), []string{`["a\"b\\c\n\t\r\b\fé😀�x","multi\nline"]`}},
		{"chars", op(`:value [\a \newline \space \tab \u0041 \\ \( \é]`), []string{`["a","\n"," ","\t","A","\\","(","é"]`}},
		{"keywords and symbols", op(`:value [:a :a/b :a.b-c? sym nil true false]`), []string{`["a","a/b","a.b-c?","sym",null,true,false]`}},
		{"sets lists maps", op(`:value {:s #{1} :l (1 (2)) :m {}}`), []string{`{"s":[1],"l":[1,[2]],"m":{}}`}},
		{"tags", op(`:value #uuid "123" :error #my/err {:a 1}`), []string{`"123"`}},
		{"nil fields are absent", "{:type :invoke :f :a :process 1 :time 2 :index nil :error nil :key nil :lost nil :mode nil :value nil}", []string{"null"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ReadEDN(strings.NewReader(tt.in), "t.edn")
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != len(tt.values) {
				t.Fatalf("%d ops, want %d", len(h), len(tt.values))
			}
			for i, v := range tt.values {
				if string(h[i].Value) != v {
					t.Errorf("op %d value %s, want %s", i, h[i].Value, v)
				}
				if h[i].Index != int64(i) {
					t.Errorf("op %d index %d", i, h[i].Index)
				}
			}
		})
	}
	h, err := ReadEDN(strings.NewReader(op(`:error #my/err {:a 1} :key 5 :mode [:r]`)), "t.edn")
	if err != nil {
		t.Fatal(err)
	}
	if h[0].Error != "#my/err {:a 1}" || h[0].Key != "5" || h[0].Mode != "[:r]" {
		t.Errorf("error %q key %q mode %q", h[0].Error, h[0].Key, h[0].Mode)
	}
}

func TestReadEDNMalformed(t *testing.T) {
	const inv = "{:type :invoke, :f :acquire, :process 1, :time 10}\n"
	tests := []struct {
		name, in string
		line     int
		field    string
		frags    []string
	}{
		{"unknown type", "[" + inv + "\n{:type :okk, :f :acquire, :process 1, :time 20}]", 3, ":type", []string{"unknown type :okk"}},
		{"type not a keyword", "{:type 1 :f :a :process 1 :time 2}", 1, ":type", []string{"must be a keyword, got 1"}},
		{"type missing", "\n{:f :a :process 1 :time 2}", 2, ":type", []string{"missing"}},
		{"f missing", "{:type :invoke :process 1 :time 2}", 1, ":f", []string{"missing"}},
		{"f empty", `{:type :invoke :f "" :process 1 :time 2}`, 1, ":f", []string{"empty"}},
		{"f wrong type", "{:type :invoke :f [1] :process 1 :time 2}", 1, ":f", []string{"must be a keyword or string, got [1]"}},
		{"process missing", "{:type :invoke :f :a :time 2}", 1, ":process", []string{"missing"}},
		{"process keyword", "{:type :invoke :f :a :process :client :time 2}", 1, ":process", []string{":client"}},
		{"process float", "{:type :invoke :f :a :process 1.0 :time 2}", 1, ":process", []string{"1.0"}},
		{"process huge", "{:type :invoke :f :a :process 99999999999999999999 :time 2}", 1, ":process", []string{"99999999999999999999"}},
		{"time missing", "{:type :invoke :f :a :process 1}", 1, ":time", []string{"missing"}},
		{"time negative", "{:type :invoke :f :a :process 1\n :time -2}", 2, ":time", []string{">= 0"}},
		{"time float", "{:type :invoke :f :a :process 1 :time 2.5}", 1, ":time", []string{"must be an integer"}},
		{"time huge", "{:type :invoke :f :a :process 1 :time 99999999999999999999N}", 1, ":time", []string{"in range"}},
		{"index negative", "{:type :invoke :f :a :process 1 :time 2 :index -1}", 1, ":index", []string{">= 0"}},
		{"index string", `{:type :invoke :f :a :process 1 :time 2 :index "1"}`, 1, ":index", []string{"must be an integer"}},
		{"lost not bool", "{:type :invoke :f :a :process 1 :time 2 :lost 1}", 1, ":lost", []string{"true or false"}},
		{"not a map", inv + "[1 2]", 2, "", []string{"must be a map, got [1 2]"}},
		{"not a map in vector", "[" + inv + ":x]", 2, "", []string{"must be a map, got :x"}},
		{"odd map", "{:type :invoke :f}", 1, ":f", []string{"key without a value"}},
		{"unclosed map", "{:type :invoke\n:f :a", 2, "", []string{"'{' opened on line 1 is not closed"}},
		{"unclosed vector", "[" + inv, 2, "", []string{"'[' opened on line 1 is not closed"}},
		{"unclosed value vector", "{:type :invoke :value [1 2\n", 2, ":value", []string{"'[' opened on line 1"}},
		{"data after vector", "[" + inv + "] {}", 2, "", []string{"after the history"}},
		{"unexpected closer", "{:type :invoke :value ]}", 1, ":value", []string{"unexpected ']'"}},
		{"unclosed string", "{:type :invoke :value \"abc\n\n", 1, ":value", []string{"in string"}},
		{"bad escape", `{:type :invoke :value "a\qb"}`, 1, ":value", []string{`invalid escape \q`}},
		{"bad unicode escape", `{:type :invoke :value "a\u12"}`, 1, ":value", []string{`\u escape`}},
		{"bad number", "{:type :invoke :value 12abc}", 1, ":value", []string{"invalid number 12abc"}},
		{"octal number", "{:type :invoke :value 017}", 1, ":value", []string{"invalid number 017"}},
		{"bad keyword", "{:type :invoke :value ::a}", 1, ":value", []string{"invalid keyword ::a"}},
		{"bare colon", "{:type :invoke :value :}", 1, ":value", []string{"invalid keyword :"}},
		{"bad char", `{:type :invoke :value \foo}`, 1, ":value", []string{`invalid character literal \foo`}},
		{"bad dispatch", "{:type :invoke :value #(1)}", 1, ":value", []string{"unsupported dispatch #("}},
		{"bad symbolic", "{:type :invoke :value ##Foo}", 1, ":value", []string{"##Foo"}},
		{"odd map in value", "{:type :invoke :value {:a}}", 1, ":value", []string{"odd number"}},
		{"too deep", "{:type :invoke :value " + strings.Repeat("[", 20000) + "}", 1, ":value", []string{"nested too deeply"}},
		{"end after hash", "{:type :invoke :value #", 1, ":value", []string{"after #"}},
		{"completion without invoke", inv + "{:type :ok, :f :acquire, :process 2, :time 20}", 2, ":process", []string{"process 2", "no open invoke"}},
		{"second invoke", inv + inv, 2, ":process", []string{"still open", "line 1"}},
		{"reuse after info", inv + "{:type :info, :f :acquire, :process 1, :time 20}\n" + inv, 3, ":process", []string{"info completion on line 2"}},
		{"f mismatch", inv + "{:type :ok, :f :release, :process 1, :time 20}", 2, ":f", []string{"does not match"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ReadEDN(strings.NewReader(tt.in), "bad.edn")
			if h != nil {
				t.Errorf("history returned with the error")
			}
			wantParseError(t, err, "bad.edn", tt.line, tt.field, tt.frags...)
		})
	}
	_, err := ReadEDN(strings.NewReader("{:type :okk, :f :a, :process 1, :time 1}"), "bad.edn")
	if got, want := err.Error(), "bad.edn:1: field :type: unknown type :okk"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

func TestLoadEDNMissingFile(t *testing.T) {
	if _, err := LoadEDN("testdata/no-such-file.edn"); !os.IsNotExist(err) {
		t.Errorf("error %v, want not-exist", err)
	}
}
