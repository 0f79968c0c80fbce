package workloads

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseMessage(t *testing.T) {
	cases := []struct {
		line    string
		wantErr string // "" = valid
	}{
		{`{"id":1,"type":"ok"}`, ""},
		{`{"id":1,"type":"ok","token":42}`, ""},
		{`{"id":2,"type":"fail","error":"timeout"}`, ""},
		{`{"id":3,"type":"info","error":"connection loss"}`, ""},
		{`{"event":"lost","error":"session expired"}`, ""},
		{`{"event":"session","session_id":"0x1","passwd":"AAAA"}`, ""},
		{`{"event":"renewed"}`, ""},
		{`{"id":1,"step":"ok","f":"acquire","mono_ns":5,"invoke_ns":3,"token":7}`, ""},
		{`{"id":1,"step":"invoke","f":"acquire","mono_ns":5,"invoke_ns":3}`, "field invoke_ns"},
		{`{"id":1,"step":"ok","f":"release","mono_ns":5,"invoke_ns":7}`, "field invoke_ns"},
		{`{"id":1,"type":"okay"}`, "field type"},
		{`{"type":"ok"}`, "field id"},
		{`{"event":"won"}`, "field event"},
		{`{"id":1,"event":"lost"}`, "field event"},
		{`{"id":1,"type":"ok","lock":{"session":"0x2a","get_lock":"zlc_l0"}}`, ""},
		{`{"id":1,"step":"ok","f":"acquire","mono_ns":5,"invoke_ns":3,"lock":{"session":"0x2a","advisory":[7]}}`, ""},
		{`{"id":1,"type":"ok","lock":{"keys":["app:1:l0"],"value":"r4nd"}}`, ""},
		{`{"id":1,"type":"ok","lock":{"table":"app.locks","row":"l0"}}`, ""},
		{`{"id":1,"type":"fail","lock":{"get_lock":"zlc_l0"}}`, "only on an acquire's ok"},
		{`{"id":1,"step":"ok","f":"release","mono_ns":5,"lock":{"get_lock":"zlc_l0"}}`, "only on an acquire's ok"},
		{`{"id":1,"type":"ok","lock":{"session":"0x2a"}}`, "names no entry"},
		{`{"id":1,"type":"ok","lock":{"get_lock":"a","advisory":[1]}}`, "names 2 entries"},
		{`{"id":1,"type":"ok","lock":{"table":"t"}}`, "names no row"},
		{`{"id":1,"type":"ok","lock":{"node":"/zlc/x","value":"v"}}`, "without keys"},
		{`{"id":1,"type":"ok","lock":{"advisory":[1,2,3]}}`, "one bigint key or two"},
		{`{"id":1,"type":"ok","lock":{"keys":[""]}}`, "an empty key"},
		{`not json`, "not a JSON object"},
		{`[1,2]`, "not a JSON object"},
	}
	for _, c := range cases {
		_, err := ParseMessage([]byte(c.line))
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.line, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", c.line, err, c.wantErr)
		}
	}
}

// TestLockPlaceSessionBound: only the locks that go with their connection (an
// advisory lock, GET_LOCK) are session-bound.
func TestLockPlaceSessionBound(t *testing.T) {
	for p, want := range map[string]bool{"advisory": true, "get_lock": true, "node": false, "keys": false, "table": false} {
		var lp LockPlace
		switch p {
		case "advisory":
			lp.Advisory = []int64{1}
		case "get_lock":
			lp.GetLock = "l"
		case "node":
			lp.Node = "/zlc/l"
		case "keys":
			lp.Keys = []string{"k"}
		case "table":
			lp.Table, lp.Row = "t", "r"
		}
		if lp.SessionBound() != want || lp.Form() != p || lp.Validate() != nil {
			t.Errorf("%s: session-bound %v, form %q, %v; want %v", p, lp.SessionBound(), lp.Form(), lp.Validate(), want)
		}
	}
}

func TestParseRequest(t *testing.T) {
	if _, err := ParseRequest([]byte(`{"id":0,"op":"init","connect":"a:1","path":"/x","kind":"mutex"}`)); err != nil {
		t.Error(err)
	}
	if _, err := ParseRequest([]byte(`{"id":0,"op":"explode"}`)); err == nil || !strings.Contains(err.Error(), "field op") {
		t.Errorf("unknown op: got %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Kind: Mutex}.Defaults()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		cfg  Config
		want string
	}{
		{Config{Kind: "paxos"}.Defaults(), "unknown workload"},
		{Config{Kind: Mutex, Permits: 2}.Defaults(), "permits"},
		{Config{Kind: Semaphore, Permits: -1}.Defaults(), "permits"},
		{Config{Kind: Mutex, HoldMin: 5 * time.Millisecond, HoldMax: time.Millisecond}.Defaults(), "hold time"},
	}
	for _, b := range bad {
		if err := b.cfg.Validate(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: got %v, want error mentioning %q", b.cfg, err, b.want)
		}
	}
}

func TestNextIsDeterministicAndInRange(t *testing.T) {
	cfg := Config{Kind: RWLock, HoldMin: time.Millisecond, HoldMax: 10 * time.Millisecond}.Defaults()
	a, b := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	reads := 0
	for range 1000 {
		x, y := cfg.Next(a, 0), cfg.Next(b, 0)
		if x != y {
			t.Fatalf("same seed, different plans: %+v vs %+v", x, y)
		}
		if x.Hold < cfg.HoldMin || x.Hold >= cfg.HoldMax {
			t.Fatalf("hold %s outside [%s, %s)", x.Hold, cfg.HoldMin, cfg.HoldMax)
		}
		if x.Request.Op != OpAcquire || x.Request.TimeoutMS != cfg.AcquireTimeout.Milliseconds() {
			t.Fatalf("bad request %+v", x.Request)
		}
		switch x.Request.Mode {
		case "read":
			reads++
		case "write":
		default:
			t.Fatalf("rwlock acquire without mode: %+v", x.Request)
		}
	}
	if reads < 600 || reads > 800 {
		t.Errorf("%d of 1000 acquires were reads, want about %.0f%%", reads, cfg.ReadFraction*100)
	}
	if m := (Config{Kind: Mutex}.Defaults()).Next(a, 0); m.Request.Mode != "" {
		t.Errorf("mutex acquire has a mode: %+v", m)
	}
}
