package driver

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// fake is a worker of the test's own: the requests it was sent, and its stdout.
type fake struct {
	t    *testing.T
	w    *Worker
	reqs chan workloads.Request
	out  *io.PipeWriter
}

func newFake(t *testing.T) *fake {
	t.Helper()
	reqR, reqW := io.Pipe()
	outR, outW := io.Pipe()
	f := &fake{t: t, w: Attach(reqW, outR, Options{}), reqs: make(chan workloads.Request, 16), out: outW}
	go func() {
		sc := bufio.NewScanner(reqR)
		for sc.Scan() {
			req, err := workloads.ParseRequest(sc.Bytes())
			if err != nil {
				t.Errorf("fake: %v", err)
				return
			}
			f.reqs <- req
		}
	}()
	t.Cleanup(func() { reqR.Close(); outW.Close() })
	return f
}

// say writes a line as the worker would.
func (f *fake) say(line string) {
	if _, err := io.WriteString(f.out, line+"\n"); err != nil {
		f.t.Errorf("fake: %v", err)
	}
}

// send sends req with a fresh id and waits until the fake read it.
func (f *fake) send(req workloads.Request) int64 {
	f.t.Helper()
	req.ID = f.w.NextID()
	if err := f.w.Send(req); err != nil {
		f.t.Fatal(err)
	}
	<-f.reqs
	return req.ID
}

func (f *fake) next() Msg {
	f.t.Helper()
	m, ok := f.w.Next(5 * time.Second)
	if !ok {
		f.t.Fatal("no line within 5s")
	}
	return m
}

// TestMatchRepliesToTheRequestInFlight: a reply with the id in flight ends the
// request; a second one, another id, or a report to a request that is not a cycle
// is a violation naming the ids and showing the line.
func TestMatchRepliesToTheRequestInFlight(t *testing.T) {
	f := newFake(t)
	f.say(`{"id":0,"type":"ok"}`)
	if m := f.next(); m.Kind != Stray || !strings.Contains(m.Err.Error(), "a reply with id 0 while no request was in flight") {
		t.Errorf("a reply before any request: %v %v", m.Kind, m.Err)
	}
	id := f.send(workloads.Request{Op: workloads.OpAcquire})
	f.say(`{"event":"lost","error":"x"}`)
	if m := f.next(); m.Kind != Event {
		t.Errorf("event: kind %v", m.Kind)
	}
	f.say(`{"id":7,"type":"ok"}`)
	m := f.next()
	var v *Violation
	if m.Kind != Stray || !errors.As(m.Err, &v) || v.Detail() != `a reply with id 7 while request 0 was in flight: {"id":7,"type":"ok"}` {
		t.Errorf("another id: %v %v", m.Kind, m.Err)
	}
	f.say(`{"id":0,"step":"ok","f":"acquire","mono_ns":5}`)
	if m := f.next(); m.Kind != Stray || !strings.Contains(m.Err.Error(), "a step report to request 0, which is not a cycle") {
		t.Errorf("a report to an acquire: %v %v", m.Kind, m.Err)
	}
	f.say(`{"id":0,"type":"ok"}`)
	if m := f.next(); m.Kind != Reply || *m.Msg.ID != id {
		t.Errorf("the reply: %v %v", m.Kind, m.Err)
	}
	f.say(`{"id":0,"type":"ok"}`)
	if m := f.next(); m.Kind != Stray || !strings.HasPrefix(m.Err.Error(), "protocol violation: a reply with id 0 while no request was in flight") {
		t.Errorf("a second reply: %v %v", m.Kind, m.Err)
	}
}

// TestMatchCycleReports: a cycle gets reports until its reply; after Settle (a v3
// cycle its last report ended) its reply is a violation.
func TestMatchCycleReports(t *testing.T) {
	f := newFake(t)
	id := f.send(workloads.Request{Op: workloads.OpCycle})
	f.say(`{"id":0,"step":"ok","f":"acquire","mono_ns":5,"invoke_ns":4}`)
	if m := f.next(); m.Kind != Report || m.Msg.F != workloads.OpAcquire {
		t.Errorf("report: %v %v", m.Kind, m.Err)
	}
	f.say(`{"id":3,"step":"ok","f":"release","mono_ns":6,"invoke_ns":5}`)
	if m := f.next(); m.Kind != Stray || !strings.Contains(m.Err.Error(), "a reply with id 3 while cycle 0 was in flight") {
		t.Errorf("another cycle's report: %v %v", m.Kind, m.Err)
	}
	f.w.Settle()
	f.say(`{"id":0,"type":"ok"}`)
	if m := f.next(); m.Kind != Stray || *m.Msg.ID != id {
		t.Errorf("a reply after Settle: %v %v", m.Kind, m.Err)
	}
}

// TestMalformedAndEnd: a line that is not a protocol line is Malformed and reading
// goes on; the output's end is Ended, for good.
func TestMalformedAndEnd(t *testing.T) {
	f := newFake(t)
	f.say(`ready`)
	if m := f.next(); m.Kind != Malformed || !strings.Contains(m.Err.Error(), `malformed line from worker`) || string(m.Line) != "ready\n" {
		t.Errorf("garbage: %v %v %q", m.Kind, m.Err, m.Line)
	}
	f.say(`{"event":"session","session_id":"0x5","passwd":"cA=="}`)
	if m := f.next(); m.Kind != Event {
		t.Errorf("session: %v", m.Kind)
	}
	if id, passwd := f.w.Session(); id != "0x5" || passwd != "cA==" {
		t.Errorf("session %q %q", id, passwd)
	}
	f.out.Close()
	for range 2 {
		if m := f.next(); m.Kind != Ended || !errors.Is(m.Err, ErrOutputEnded) {
			t.Errorf("end: %v %v", m.Kind, m.Err)
		}
	}
	if _, err := f.w.Await(Wait{Limit: time.Second}); !errors.Is(err, ErrOutputEnded) {
		t.Errorf("Await after the end: %v", err)
	}
}

// TestAwait: Await hands events over and returns the reply; it words a timeout by
// what was in flight, and ends at Stop.
func TestAwait(t *testing.T) {
	f := newFake(t)
	f.send(workloads.Request{Op: workloads.OpAcquire})
	var events []string
	go func() {
		f.say(`{"event":"lost","error":"gone"}`)
		f.say(`{"id":0,"type":"fail","error":"timeout"}`)
	}()
	m, err := f.w.Await(Wait{Limit: 5 * time.Second, OnEvent: func(m workloads.Message) { events = append(events, m.Event) }})
	if err != nil || m.Kind != Reply || m.Msg.Type != workloads.ReplyFail || len(events) != 1 {
		t.Fatalf("Await: %v %v, events %v", m, err, events)
	}
	f.send(workloads.Request{Op: workloads.OpRelease})
	if _, err := f.w.Await(Wait{Limit: 10 * time.Millisecond}); err == nil || err.Error() != "no reply within 10ms" {
		t.Errorf("timeout: %v", err)
	}
	f.send(workloads.Request{Op: workloads.OpCycle})
	if _, err := f.w.Await(Wait{Limit: 10 * time.Millisecond}); err == nil || err.Error() != "cycle 2: nothing reported within 10ms" {
		t.Errorf("cycle timeout: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := f.w.Await(Wait{Limit: time.Minute, Stop: stop}); !errors.Is(err, ErrStopped) {
		t.Errorf("stop: %v", err)
	}
	if _, ok := f.w.Next(0); ok {
		t.Error("Next(0) with nothing written: a line")
	}
}

// TestSyncClock: the fastest round trip gives the offset, known to within Err.
func TestSyncClock(t *testing.T) {
	const ahead = int64(5 * time.Second)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	calls := 0
	call := func(req workloads.Request) (workloads.Message, error) {
		calls++
		if req.Op != workloads.OpClock {
			t.Errorf("request %+v", req)
		}
		if calls == 2 {
			time.Sleep(5 * time.Millisecond) // a slow round trip loses
		}
		mono := now() + ahead
		return workloads.Message{Type: workloads.ReplyOK, MonoNS: &mono}, nil
	}
	c, err := SyncClock(3, now, call)
	if err != nil || calls != 3 {
		t.Fatalf("SyncClock: %v after %d calls", err, calls)
	}
	if c.Offset < ahead-c.Err || c.Offset > ahead+c.Err || c.Err > int64(time.Millisecond) {
		t.Errorf("clock %+v, want offset %d", c, ahead)
	}
	if mono := now() + ahead; c.InvokeAt(mono) > c.At(mono) || c.CompleteAt(mono) < c.At(mono) {
		t.Errorf("invoke %d, at %d, complete %d", c.InvokeAt(mono), c.At(mono), c.CompleteAt(mono))
	}
	_, err = SyncClock(1, now, func(workloads.Request) (workloads.Message, error) {
		return workloads.Message{Type: workloads.ReplyOK}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "want an ok reply with mono_ns") {
		t.Errorf("a reply without mono_ns: %v", err)
	}
}

func TestBounds(t *testing.T) {
	b := Bounds{SessionTimeout: 4 * time.Second}
	if got := b.ReplyLimit(2 * time.Second); got != 19*time.Second {
		t.Errorf("ReplyLimit(2s) = %s, want 19s", got)
	}
	if got := b.InitReplyLimit(); got != 18*time.Second {
		t.Errorf("InitReplyLimit() = %s, want 18s", got)
	}
}

// TestStartedProcess: a real process: its lines in order in the trace, its reply,
// its polite close and exit status.
func TestStartedProcess(t *testing.T) {
	var mu sync.Mutex
	var trace []string
	w, err := Start(Command("/bin/sh", "-c", `read req; echo '{"id":0,"type":"ok"}'; read req; echo '{"id":1,"type":"ok"}'; exit 3`),
		Options{Trace: func(dir, text string) { mu.Lock(); trace = append(trace, dir+" "+text); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(workloads.Request{ID: w.NextID(), Op: workloads.OpInit}); err != nil {
		t.Fatal(err)
	}
	if m, err := w.Await(Wait{Limit: 5 * time.Second}); err != nil || m.Kind != Reply {
		t.Fatalf("init: %v %v", m, err)
	}
	w.Close(5 * time.Second)
	if got := ExitText(w.ExitErr()); got != "exit status 3" {
		t.Errorf("exit %q", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(trace)
		mu.Unlock()
		if n == 6 || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"started: /bin/sh -c", `> {"id":0,"op":"init"}`, `< {"id":0,"type":"ok"}`, `> {"id":1,"op":"close"}`, `< {"id":1,"type":"ok"}`, "exited: exit status 3"}
	if len(trace) != len(want) {
		t.Fatalf("trace %q", trace)
	}
	for i := range want {
		if !strings.HasPrefix(trace[i], want[i]) {
			t.Errorf("trace line %d %q, want %q", i, trace[i], want[i])
		}
	}
}

// TestStoppedWorkerIsWaitedFor: a Pausable wait does not time out while the process
// is stopped; Kill ends a stopped process.
func TestStoppedWorkerIsWaitedFor(t *testing.T) {
	w, err := Start(Command("/bin/sh", "-c", "read req; sleep 60"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Kill()
	if err := syscall.Kill(-w.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !w.Stopped(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not stopped after SIGSTOP")
		}
	}
	if err := w.Send(workloads.Request{ID: w.NextID(), Op: workloads.OpAcquire}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	time.AfterFunc(200*time.Millisecond, func() { close(stop) })
	if _, err := w.Await(Wait{Limit: 20 * time.Millisecond, Stop: stop, Pausable: true}); !errors.Is(err, ErrStopped) {
		t.Errorf("a stopped worker timed out: %v", err)
	}
	w.Kill()
	if got := ExitText(w.ExitErr()); got != "signal: killed" {
		t.Errorf("exit %q", got)
	}
}
