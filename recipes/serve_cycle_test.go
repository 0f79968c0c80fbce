package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Protocol v2 on the fake recipe (serve_test.go): no ZooKeeper.

const initV2Line = `{"id":0,"op":"init","connect":"h1:2181","session_timeout_ms":4000,"path":"/zlc/run/l0","kind":"mutex","permits":1,"worker":3,"protocol":2}`

// stepsOf reads the reports of cycle id up to its reply and names them "f step".
func stepsOf(w *worker, id int64) ([]string, []workloads.Message) {
	w.t.Helper()
	var steps []string
	var reports []workloads.Message
	for {
		m := w.reply()
		if *m.ID != id {
			w.t.Fatalf("line of id %d during cycle %d", *m.ID, id)
		}
		if !m.IsReport() {
			if m.Type != workloads.ReplyOK {
				w.t.Fatalf("cycle reply %s %q, want ok", m.Type, m.Error)
			}
			return steps, reports
		}
		steps = append(steps, m.F+" "+m.Step)
		reports = append(reports, m)
	}
}

func TestServeV2CycleReportsEachStep(t *testing.T) {
	ff := &fakeFactory{acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
		return Grant{Token: json.RawMessage("7")}, nil
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initV2Line)
	if m := w.expectReply(0, "ok", ""); m.Protocol != 2 {
		t.Fatalf("init reply protocol %d, want 2", m.Protocol)
	}
	w.send(`{"id":1,"op":"clock"}`)
	c := w.expectReply(1, "ok", "")
	if c.MonoNS == nil {
		t.Fatal("clock reply without mono_ns")
	}
	w.send(`{"id":2,"op":"cycle","timeout_ms":100,"hold_us":30000,"depth":2}`)
	steps, reports := stepsOf(w, 2)
	want := "acquire invoke,acquire ok,acquire invoke,acquire ok,release invoke,release ok,release invoke,release ok"
	if got := strings.Join(steps, ","); got != want {
		t.Fatalf("reports %s, want %s", got, want)
	}
	if string(reports[1].Token) != "7" {
		t.Errorf("acquire ok token %s, want 7", reports[1].Token)
	}
	last := *c.MonoNS
	for _, r := range reports {
		if *r.MonoNS < last {
			t.Errorf("report times go backwards: %d after %d", *r.MonoNS, last)
		}
		last = *r.MonoNS
	}
	if held := time.Duration(*reports[4].MonoNS - *reports[3].MonoNS); held < 30*time.Millisecond {
		t.Errorf("held %s, want hold_us 30ms", held)
	}
	w.send(`{"id":3,"op":"close"}`)
	w.expectReply(3, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeV2CycleEndsAtTimeoutInfoOrLost(t *testing.T) {
	var calls int
	ff := &fakeFactory{acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
		calls++
		switch calls {
		case 1:
			return Grant{}, Fail(ErrTimeout)
		case 2:
			return Grant{}, Info(errors.New("connection loss"))
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			f.cfg.Events.Lost("session expired")
		}()
		return Grant{}, nil
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initV2Line)
	w.expectReply(0, "ok", "")
	for i, want := range []string{
		"acquire invoke,acquire fail",
		"acquire invoke,acquire info",
		"acquire invoke,acquire ok", // then lost during the 10 s hold: no release
	} {
		id := int64(i + 1)
		w.send(fmt.Sprintf(`{"id":%d,"op":"cycle","timeout_ms":100,"hold_us":10000000}`, id))
		steps, _ := stepsOf(w, id)
		if got := strings.Join(steps, ","); got != want {
			t.Errorf("cycle %d: reports %s, want %s", id, got, want)
		}
	}
	if len(w.events) != 1 || w.events[0].Event != workloads.EventLost {
		t.Errorf("events %+v, want one lost", w.events)
	}
}

func TestServeV1UnlessOffered(t *testing.T) {
	w := startWorker(t, context.Background(), ServeConfig{New: (&fakeFactory{}).New})
	w.send(initLine)
	if m := w.expectReply(0, "ok", ""); m.Protocol != 0 {
		t.Fatalf("init reply protocol %d without the offer", m.Protocol)
	}
	w.send(`{"id":1,"op":"cycle","timeout_ms":100,"hold_us":1}`)
	if err := w.wait(); err == nil || !strings.Contains(err.Error(), "init agreed v1") {
		t.Fatalf("Serve = %v, want a protocol error", err)
	}
	v1 := startWorker(t, context.Background(), ServeConfig{New: (&fakeFactory{}).New, MaxProtocol: 1})
	v1.send(initV2Line)
	if m := v1.expectReply(0, "ok", ""); m.Protocol != 0 {
		t.Fatalf("a MaxProtocol 1 worker agreed to protocol %d", m.Protocol)
	}
}

const initV3Line = `{"id":0,"op":"init","connect":"h1:2181","session_timeout_ms":4000,"path":"/zlc/run/l0","kind":"mutex","permits":1,"worker":3,"protocol":3}`

// v3Steps reads n reports of cycle id (v3: completions with their invoke times) and
// names them "f step"; invoke_ns must not be after mono_ns, nor before the last.
func v3Steps(w *worker, id int64, n int) []string {
	w.t.Helper()
	var steps []string
	var last int64
	for range n {
		m := w.reply()
		if *m.ID != id || !m.IsReport() {
			w.t.Fatalf("want a report of cycle %d, got %+v", id, m)
		}
		if m.InvokeNS == nil || *m.InvokeNS < last || *m.InvokeNS > *m.MonoNS {
			w.t.Fatalf("report %s %s: invoke_ns %v, want between %d and mono_ns %d", m.F, m.Step, m.InvokeNS, last, *m.MonoNS)
		}
		last = *m.MonoNS
		steps = append(steps, m.F+" "+m.Step)
	}
	return steps
}

// expectNoCycleReply closes the worker: the close's reply must be the next line (a
// v3 cycle ended by its last report has no reply).
func expectNoCycleReply(w *worker, closeID int64) {
	w.t.Helper()
	w.send(fmt.Sprintf(`{"id":%d,"op":"close"}`, closeID))
	w.expectReply(closeID, "ok", "")
}

func TestServeV3CycleReportsOncePerOp(t *testing.T) {
	ff := &fakeFactory{acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
		time.Sleep(5 * time.Millisecond)
		return Grant{Token: json.RawMessage("7")}, nil
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initV3Line)
	if m := w.expectReply(0, "ok", ""); m.Protocol != 3 {
		t.Fatalf("init reply protocol %d, want 3", m.Protocol)
	}
	w.send(`{"id":1,"op":"cycle","timeout_ms":100,"hold_us":30000,"depth":2}`)
	steps := v3Steps(w, 1, 4)
	if got, want := strings.Join(steps, ","), "acquire ok,acquire ok,release ok,release ok"; got != want {
		t.Fatalf("reports %s, want %s", got, want)
	}
	expectNoCycleReply(w, 2)
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeV3CycleEndsAtTimeoutOrLost(t *testing.T) {
	var calls int
	ff := &fakeFactory{acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
		calls++
		if calls == 1 {
			return Grant{}, Fail(ErrTimeout)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			f.cfg.Events.Lost("session expired")
		}()
		return Grant{}, nil
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initV3Line)
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"cycle","timeout_ms":100,"hold_us":10000000}`)
	if got := strings.Join(v3Steps(w, 1, 1), ","); got != "acquire fail" {
		t.Fatalf("cycle 1: reports %s, want acquire fail", got)
	}
	// Lost during the 10 s hold: no release, and the reply says the cycle is over.
	w.send(`{"id":2,"op":"cycle","timeout_ms":100,"hold_us":10000000}`)
	if got := strings.Join(v3Steps(w, 2, 1), ","); got != "acquire ok" {
		t.Fatalf("cycle 2: reports %s, want acquire ok", got)
	}
	w.expectReply(2, "ok", "")
	if len(w.events) != 1 || w.events[0].Event != workloads.EventLost {
		t.Errorf("events %+v, want one lost", w.events)
	}
	expectNoCycleReply(w, 3)
}
