package recipes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// fakeRecipe is a fake, for testing Serve: it never talks to ZooKeeper; each test
// scripts its acquire and release outcomes and emits events through cfg.Events.
type fakeRecipe struct {
	cfg     Config
	acquire func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error)
	release func(ctx context.Context, f *fakeRecipe) error

	mu     sync.Mutex
	closed int
}

func (f *fakeRecipe) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if f.acquire == nil {
		return Grant{}, nil
	}
	return f.acquire(ctx, f, req)
}

func (f *fakeRecipe) Release(ctx context.Context) error {
	if f.release == nil {
		return nil
	}
	return f.release(ctx, f)
}

func (f *fakeRecipe) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func (f *fakeRecipe) closeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// fakeFactory builds fakeRecipes and remembers them.
type fakeFactory struct {
	acquire func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error)
	release func(ctx context.Context, f *fakeRecipe) error
	// onInit, if set, runs in the constructor; its error fails the init.
	onInit func(cfg Config) error

	mu    sync.Mutex
	built []*fakeRecipe
}

func (ff *fakeFactory) New(ctx context.Context, cfg Config) (Recipe, error) {
	if ff.onInit != nil {
		if err := ff.onInit(cfg); err != nil {
			return nil, err
		}
	}
	f := &fakeRecipe{cfg: cfg, acquire: ff.acquire, release: ff.release}
	ff.mu.Lock()
	ff.built = append(ff.built, f)
	ff.mu.Unlock()
	return f, nil
}

func (ff *fakeFactory) last(t *testing.T) *fakeRecipe {
	t.Helper()
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if len(ff.built) == 0 {
		t.Fatal("no recipe was built")
	}
	return ff.built[len(ff.built)-1]
}

// lockedBuffer is a goroutine-safe log sink.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// worker runs Serve over pipes, as a worker process would run over stdin/stdout.
type worker struct {
	t      *testing.T
	stdin  *io.PipeWriter
	lines  chan string
	done   chan error
	log    *lockedBuffer
	events []workloads.Message
}

const testWait = 10 * time.Second

func startWorker(t *testing.T, ctx context.Context, cfg ServeConfig) *worker {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &worker{t: t, stdin: inW, lines: make(chan string, 10000), done: make(chan error, 1), log: &lockedBuffer{}}
	cfg.In, cfg.Out, cfg.Log = inR, outW, w.log
	go func() {
		err := Serve(ctx, cfg)
		outW.Close()
		w.done <- err
	}()
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
	})
	return w
}

func (w *worker) send(line string) {
	w.t.Helper()
	if _, err := io.WriteString(w.stdin, line+"\n"); err != nil {
		w.t.Fatalf("writing %s: %v", line, err)
	}
}

// next returns the next stdout line, parsed; it fails the test unless the line is
// a valid protocol message.
func (w *worker) next() workloads.Message {
	w.t.Helper()
	select {
	case line, ok := <-w.lines:
		if !ok {
			w.t.Fatal("stdout closed, want another line")
		}
		m, err := workloads.ParseMessage([]byte(line))
		if err != nil {
			w.t.Fatalf("stdout line %q: %v", line, err)
		}
		return m
	case <-time.After(testWait):
		w.t.Fatal("no stdout line within the wait")
	}
	return workloads.Message{}
}

// reply returns the next reply, collecting events on the way.
func (w *worker) reply() workloads.Message {
	w.t.Helper()
	for {
		m := w.next()
		if m.Event != "" {
			w.events = append(w.events, m)
			continue
		}
		return m
	}
}

func (w *worker) expectReply(id int64, typ, msg string) workloads.Message {
	w.t.Helper()
	m := w.reply()
	if *m.ID != id || m.Type != typ || m.Error != msg {
		w.t.Fatalf("reply = id %d %s %q, want id %d %s %q", *m.ID, m.Type, m.Error, id, typ, msg)
	}
	return m
}

// wait returns Serve's result and checks that stdout holds no more lines.
func (w *worker) wait() error {
	w.t.Helper()
	select {
	case err := <-w.done:
		for line := range w.lines {
			m, perr := workloads.ParseMessage([]byte(line))
			if perr != nil {
				w.t.Fatalf("stdout line %q: %v", line, perr)
			}
			if m.Event == "" {
				w.t.Errorf("unexpected reply after the last one: %s", line)
			}
			w.events = append(w.events, m)
		}
		return err
	case <-time.After(testWait):
		w.t.Fatal("Serve did not return")
	}
	return nil
}

const initLine = `{"id":0,"op":"init","connect":"h1:2181,h2:2181","session_timeout_ms":4000,"path":"/zlc/run/l0","kind":"mutex","permits":1,"worker":3}`

func TestServeAnswersEachRequestOnceWithItsID(t *testing.T) {
	ff := &fakeFactory{acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
		if req.Timeout != 2*time.Second {
			return Grant{}, fmt.Errorf("timeout %v", req.Timeout)
		}
		return Grant{Token: json.RawMessage("42")}, nil
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	cfg := ff.last(t).cfg
	if strings.Join(cfg.Servers, " ") != "h1:2181 h2:2181" || cfg.SessionTimeout != 4*time.Second ||
		cfg.Path != "/zlc/run/l0" || cfg.Kind != "mutex" || cfg.Permits != 1 || cfg.Worker != 3 {
		t.Errorf("recipe config = %+v", cfg)
	}
	w.send(`{"id":17,"op":"acquire","timeout_ms":2000}`)
	if m := w.expectReply(17, "ok", ""); string(m.Token) != "42" {
		t.Errorf("token = %s, want 42", m.Token)
	}
	w.send(`{"id":18,"op":"release"}`)
	w.expectReply(18, "ok", "")
	w.send(`{"id":5,"op":"close"}`)
	w.expectReply(5, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatalf("Serve = %v, want nil after close", err)
	}
	if n := ff.last(t).closeCount(); n != 1 {
		t.Errorf("recipe closed %d times, want 1", n)
	}
}

func TestServeClassifiesOutcomes(t *testing.T) {
	n := 0
	ff := &fakeFactory{
		acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
			n++
			switch n {
			case 1:
				return Grant{}, Fail(ErrTimeout)
			case 2:
				return Grant{Token: json.RawMessage("7")}, errors.New("connection loss")
			default:
				return Grant{}, fmt.Errorf("wrapped: %w", Fail(errors.New("deadlock")))
			}
		},
		release: func(ctx context.Context, f *fakeRecipe) error { return Fail(errors.New("not held")) },
	}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"acquire","timeout_ms":10}`)
	w.expectReply(1, "fail", "timeout")
	w.send(`{"id":2,"op":"acquire","timeout_ms":10}`)
	if m := w.expectReply(2, "info", "connection loss"); m.Token != nil {
		t.Errorf("info reply carries token %s", m.Token)
	}
	w.send(`{"id":3,"op":"acquire","timeout_ms":10}`)
	w.expectReply(3, "fail", "wrapped: deadlock")
	w.send(`{"id":4,"op":"release"}`)
	w.expectReply(4, "fail", "not held")
	w.send(`{"id":5,"op":"acquire","timeout_ms":-1}`)
	w.expectReply(5, "fail", "negative timeout_ms -1")
	w.send(`{"id":6,"op":"close"}`)
	w.expectReply(6, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeWritesEventsInOrderWithReplies(t *testing.T) {
	ff := &fakeFactory{
		onInit: func(cfg Config) error {
			cfg.Events.Session(0x1234abcd, []byte{1, 2, 3})
			return nil
		},
		acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
			return Grant{}, nil
		},
		release: func(ctx context.Context, f *fakeRecipe) error {
			f.cfg.Events.Lost("session expired")
			return Fail(errors.New("not held"))
		},
	}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	if m := w.next(); m.Event != "session" || m.SessionID != "0x1234abcd" || m.Passwd != "AQID" {
		t.Fatalf("first line = %+v, want the session event", m)
	}
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"acquire"}`)
	w.expectReply(1, "ok", "")
	w.send(`{"id":2,"op":"release"}`)
	if m := w.next(); m.Event != "lost" || m.Error != "session expired" {
		t.Fatalf("line = %+v, want the lost event before the release reply", m)
	}
	w.expectReply(2, "fail", "not held")
	w.send(`{"id":3,"op":"close"}`)
	w.expectReply(3, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeEventsFromOtherGoroutines(t *testing.T) {
	const perOp = 50
	ff := &fakeFactory{acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
		var wg sync.WaitGroup
		for i := range perOp {
			wg.Go(func() {
				if i%2 == 0 {
					f.cfg.Events.Lost(strings.Repeat("x", 3000)) // long lines must stay whole
				} else {
					f.cfg.Events.Session(int64(i), nil)
				}
			})
		}
		wg.Wait()
		return Grant{}, nil
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	for id := int64(1); id <= 20; id++ {
		w.send(fmt.Sprintf(`{"id":%d,"op":"acquire"}`, id))
		w.expectReply(id, "ok", "")
	}
	w.send(`{"id":99,"op":"close"}`)
	w.expectReply(99, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
	if len(w.events) != 20*perOp {
		t.Errorf("got %d events, want %d", len(w.events), 20*perOp)
	}
}

func TestServeMalformedLineIsAnError(t *testing.T) {
	for _, line := range []string{
		`not json`,
		`{"id":1,"op":"dance"}`,
		`["init"]`,
		`{"id":1,"op":"acquire"}`, // before init
	} {
		t.Run(line, func(t *testing.T) {
			ff := &fakeFactory{}
			w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
			w.send(line)
			if err := w.wait(); err == nil {
				t.Fatal("Serve = nil, want an error")
			}
			if w.log.String() == "" {
				t.Error("nothing logged")
			}
		})
	}
}

func TestServeMalformedLineAfterInitClosesRecipe(t *testing.T) {
	ff := &fakeFactory{}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"acquire","timeout_ms":"soon"}`)
	err := w.wait()
	if err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("Serve = %v, want a malformed-line error", err)
	}
	if !strings.Contains(w.log.String(), "soon") {
		t.Errorf("log does not quote the line: %s", w.log.String())
	}
	if n := ff.last(t).closeCount(); n != 1 {
		t.Errorf("recipe closed %d times, want 1", n)
	}
}

func TestServeSecondInitIsAnError(t *testing.T) {
	ff := &fakeFactory{}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.send(initLine)
	if err := w.wait(); err == nil {
		t.Fatal("Serve = nil, want an error")
	}
}

func TestServeEOFClosesAndReturns(t *testing.T) {
	ff := &fakeFactory{}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.stdin.Close()
	if err := w.wait(); err != nil {
		t.Fatalf("Serve = %v, want nil on EOF", err)
	}
	if n := ff.last(t).closeCount(); n != 1 {
		t.Errorf("recipe closed %d times, want 1", n)
	}
}

func TestServeEOFBeforeInit(t *testing.T) {
	w := startWorker(t, context.Background(), ServeConfig{New: (&fakeFactory{}).New})
	w.stdin.Close()
	if err := w.wait(); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
}

func TestServeEOFCancelsRunningRequest(t *testing.T) {
	ff := &fakeFactory{acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
		<-ctx.Done()
		return Grant{}, Info(ctx.Err())
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"acquire"}`)
	w.stdin.Close()
	w.expectReply(1, "info", "context canceled")
	if err := w.wait(); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
}

func TestServeCloseWithStdinOpen(t *testing.T) {
	ff := &fakeFactory{}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"close"}`)
	w.expectReply(1, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	if n := ff.last(t).closeCount(); n != 1 {
		t.Errorf("recipe closed %d times, want 1", n)
	}
}

func TestServeCloseBeforeInit(t *testing.T) {
	w := startWorker(t, context.Background(), ServeConfig{New: (&fakeFactory{}).New})
	w.send(`{"id":4,"op":"close"}`)
	w.expectReply(4, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeFailedInitCanBeRetried(t *testing.T) {
	calls := 0
	ff := &fakeFactory{onInit: func(cfg Config) error {
		calls++
		if calls == 1 {
			return Fail(errors.New("no session within 8s"))
		}
		return nil
	}}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "fail", "no session within 8s")
	w.send(strings.Replace(initLine, `"id":0`, `"id":1`, 1))
	w.expectReply(1, "ok", "")
	w.send(`{"id":2,"op":"close"}`)
	w.expectReply(2, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeValidatesInit(t *testing.T) {
	for _, tc := range []struct{ line, msg string }{
		{`{"id":0,"op":"init","session_timeout_ms":4000,"path":"/a","kind":"mutex"}`, "init: connect is empty"},
		{`{"id":0,"op":"init","connect":"h:1","path":"/a","kind":"mutex"}`, "init: session_timeout_ms must be positive, got 0"},
		{`{"id":0,"op":"init","connect":"h:1","session_timeout_ms":4000,"path":"a","kind":"mutex"}`, `init: path must be an absolute znode path, got "a"`},
		{`{"id":0,"op":"init","connect":"h:1","session_timeout_ms":4000,"path":"/a"}`, "init: kind is empty"},
	} {
		w := startWorker(t, context.Background(), ServeConfig{New: (&fakeFactory{}).New})
		w.send(tc.line)
		w.expectReply(0, "fail", tc.msg)
		w.stdin.Close()
		if err := w.wait(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServeUnknownRecipe(t *testing.T) {
	err := Serve(context.Background(), ServeConfig{Recipe: "nope", In: strings.NewReader(""), Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "gozk") {
		t.Fatalf("Serve = %v, want an unknown-recipe error naming the known ones", err)
	}
}

func TestServeGoZKRejectsOtherKinds(t *testing.T) {
	w := startWorker(t, context.Background(), ServeConfig{Recipe: "gozk"})
	w.send(strings.Replace(initLine, `"kind":"mutex"`, `"kind":"rwlock"`, 1))
	w.expectReply(0, "fail", "recipe gozk does not support kind rwlock")
	w.send(`{"id":1,"op":"close"}`)
	w.expectReply(1, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeContextEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ff := &fakeFactory{}
	w := startWorker(t, ctx, ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	cancel()
	if err := w.wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve = %v, want context.Canceled", err)
	}
	if n := ff.last(t).closeCount(); n != 1 {
		t.Errorf("recipe closed %d times, want 1", n)
	}
}

// recordingWriter checks that every Write is exactly one line and counts flushes.
type recordingWriter struct {
	mu      sync.Mutex
	writes  []string
	flushes int
	fail    bool
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return 0, errors.New("broken pipe")
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recordingWriter) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
	return nil
}

func TestServeWritesWholeLinesAndFlushes(t *testing.T) {
	ff := &fakeFactory{onInit: func(cfg Config) error {
		cfg.Events.Session(1, nil)
		return nil
	}}
	out := &recordingWriter{}
	in := strings.NewReader(initLine + "\n" + `{"id":1,"op":"acquire"}` + "\n\n" + `{"id":2,"op":"release"}` + "\n" + `{"id":3,"op":"close"}`)
	if err := Serve(context.Background(), ServeConfig{New: ff.New, In: in, Out: out}); err != nil {
		t.Fatal(err)
	}
	if len(out.writes) != 5 || out.flushes != 5 {
		t.Fatalf("%d writes, %d flushes, want 5 and 5: %q", len(out.writes), out.flushes, out.writes)
	}
	for _, w := range out.writes {
		if !strings.HasSuffix(w, "\n") || strings.Count(w, "\n") != 1 {
			t.Errorf("write %q is not one line", w)
		}
		if _, err := workloads.ParseMessage([]byte(strings.TrimSuffix(w, "\n"))); err != nil {
			t.Errorf("write %q: %v", w, err)
		}
	}
}

func TestServeWriteErrorIsAnError(t *testing.T) {
	out := &recordingWriter{fail: true}
	err := Serve(context.Background(), ServeConfig{New: (&fakeFactory{}).New, In: strings.NewReader(initLine + "\n"), Out: out})
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("Serve = %v, want the write error", err)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err      error
		typ, msg string
	}{
		{nil, "ok", ""},
		{Fail(ErrTimeout), "fail", "timeout"},
		{fmt.Errorf("acquire: %w", Fail(ErrTimeout)), "fail", "acquire: timeout"},
		{errors.New("zk: connection closed"), "info", "zk: connection closed"},
		{Info(errors.New("maybe")), "info", "maybe"},
		{Fail(Info(errors.New("outer wins"))), "fail", "outer wins"},
		{context.DeadlineExceeded, "info", "context deadline exceeded"},
	} {
		typ, msg := Classify(tc.err)
		if typ != tc.typ || msg != tc.msg {
			t.Errorf("Classify(%v) = %s %q, want %s %q", tc.err, typ, msg, tc.typ, tc.msg)
		}
	}
	if Fail(nil) != nil || Info(nil) != nil {
		t.Error("Fail(nil) and Info(nil) must be nil")
	}
	if !errors.Is(Fail(ErrTimeout), ErrTimeout) {
		t.Error("Fail must wrap its error")
	}
}

func TestFormatSessionID(t *testing.T) {
	if got := FormatSessionID(0x10000a3b2c40001); got != "0x10000a3b2c40001" {
		t.Errorf("got %s", got)
	}
	if got := FormatSessionID(-1); got != "0xffffffffffffffff" {
		t.Errorf("got %s", got)
	}
}

func TestLookup(t *testing.T) {
	if _, err := Lookup("gozk"); err != nil {
		t.Error(err)
	}
	if _, err := Lookup("exec"); err == nil {
		t.Error("Lookup(exec) = nil error; exec is the harness's, not a recipe")
	}
	if _, err := Lookup("kazoo-lock"); err == nil || !strings.Contains(err.Error(), "python") {
		t.Errorf("Lookup(kazoo-lock) = %v, want an error: it has its own Python worker", err)
	}
}
