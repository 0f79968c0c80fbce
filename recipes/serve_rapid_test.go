package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/zlockcheck/zlockcheck/workloads"
	"pgregory.net/rapid"
)

// scriptedOp is one generated request and the outcome the fake gives it.
type scriptedOp struct {
	op      string
	outcome string // ok, fail or info
	events  int    // events the fake emits while serving it
}

func TestServeProtocolProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) scriptedOp {
			return scriptedOp{
				op:      rapid.SampledFrom([]string{workloads.OpAcquire, workloads.OpRelease}).Draw(t, "op"),
				outcome: rapid.SampledFrom([]string{"ok", "fail", "info"}).Draw(t, "outcome"),
				events:  rapid.IntRange(0, 5).Draw(t, "events"),
			}
		}), 0, 30).Draw(t, "ops")
		endWithClose := rapid.Bool().Draw(t, "close")
		firstID := rapid.Int64Range(0, 1<<40).Draw(t, "firstID")

		var mu sync.Mutex
		next := 0
		serve := func(f *fakeRecipe) error {
			mu.Lock()
			s := ops[next]
			next++
			mu.Unlock()
			var wg sync.WaitGroup
			for i := range s.events {
				wg.Go(func() {
					if i%2 == 0 {
						f.cfg.Events.Lost(fmt.Sprintf("reason \"%d\"\n", i))
					} else {
						f.cfg.Events.Session(int64(i)<<40, []byte("pw"))
					}
				})
			}
			wg.Wait()
			switch s.outcome {
			case "fail":
				return Fail(errors.New("no"))
			case "info":
				return errors.New("maybe")
			}
			return nil
		}
		ff := &fakeFactory{
			acquire: func(ctx context.Context, f *fakeRecipe, req AcquireRequest) (Grant, error) {
				return Grant{Token: []byte("1")}, serve(f)
			},
			release: func(ctx context.Context, f *fakeRecipe) error { return serve(f) },
		}

		var in strings.Builder
		id := firstID
		fmt.Fprintf(&in, `{"id":%d,"op":"init","connect":"h:1","session_timeout_ms":1000,"path":"/l","kind":"mutex"}`+"\n", id)
		for _, s := range ops {
			id++
			fmt.Fprintf(&in, `{"id":%d,"op":%q,"timeout_ms":5}`+"\n", id, s.op)
		}
		if endWithClose {
			id++
			fmt.Fprintf(&in, `{"id":%d,"op":"close"}`+"\n", id)
		}
		out := &recordingWriter{}
		if err := Serve(context.Background(), ServeConfig{New: ff.New, In: strings.NewReader(in.String()), Out: out}); err != nil {
			t.Fatalf("Serve: %v", err)
		}

		wantEvents := 0
		for _, s := range ops {
			wantEvents += s.events
		}
		var replies []workloads.Message
		events := 0
		for _, w := range out.writes {
			if !strings.HasSuffix(w, "\n") || strings.Count(w, "\n") != 1 {
				t.Fatalf("write %q is not one line", w)
			}
			m, err := workloads.ParseMessage([]byte(w))
			if err != nil {
				t.Fatalf("line %q: %v", w, err)
			}
			if m.Event != "" {
				events++
				continue
			}
			replies = append(replies, m)
		}
		if events != wantEvents {
			t.Fatalf("%d events, want %d", events, wantEvents)
		}
		if want := int(id - firstID + 1); len(replies) != want {
			t.Fatalf("%d replies, want %d", len(replies), want)
		}
		for i, m := range replies {
			if *m.ID != firstID+int64(i) {
				t.Fatalf("reply %d has id %d, want %d", i, *m.ID, firstID+int64(i))
			}
			want := "ok"
			if i >= 1 && i <= len(ops) {
				want = ops[i-1].outcome
			}
			if m.Type != want {
				t.Fatalf("reply %d is %s, want %s", i, m.Type, want)
			}
			if (m.Token != nil) != (want == "ok" && i >= 1 && i <= len(ops) && ops[i-1].op == workloads.OpAcquire) {
				t.Fatalf("reply %d token %s", i, m.Token)
			}
		}
		if len(ff.built) != 1 || ff.built[0].closeCount() != 1 {
			t.Fatalf("built %d recipes; want 1, closed once", len(ff.built))
		}
	})
}
