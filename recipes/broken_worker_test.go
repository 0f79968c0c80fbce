package recipes

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestBrokenWorkerSpeaksProtocol runs testdata/broken_worker.py the way the harness
// does, one request at a time, and checks its replies; two of them grant the lock
// together, which is the point of the script.
func TestBrokenWorkerSpeaksProtocol(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	type proc struct {
		in  io.WriteCloser
		out *bufio.Scanner
		cmd *exec.Cmd
	}
	start := func(worker int) proc {
		cmd := exec.Command(py, "testdata/broken_worker.py")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return proc{in: in, out: bufio.NewScanner(out), cmd: cmd}
	}
	ask := func(p proc, id int64, req string) {
		t.Helper()
		if _, err := fmt.Fprintln(p.in, req); err != nil {
			t.Fatal(err)
		}
		got := make(chan bool, 1)
		go func() { got <- p.out.Scan() }()
		select {
		case ok := <-got:
			if !ok {
				t.Fatalf("no reply to %s: %v", req, p.out.Err())
			}
		case <-time.After(testWait):
			t.Fatalf("no reply to %s within the wait (stdout not flushed?)", req)
		}
		m, err := workloads.ParseMessage(p.out.Bytes())
		if err != nil {
			t.Fatalf("reply %q: %v", p.out.Text(), err)
		}
		if m.ID == nil || *m.ID != id || m.Type != workloads.ReplyOK {
			t.Fatalf("reply %q to %s, want ok with id %d", p.out.Text(), req, id)
		}
	}
	a, b := start(1), start(2)
	ask(a, 0, initLine)
	ask(b, 0, initLine)
	ask(a, 1, `{"id":1,"op":"acquire","timeout_ms":2000}`)
	ask(b, 1, `{"id":1,"op":"acquire","timeout_ms":2000}`) // both hold: broken on purpose
	ask(a, 2, `{"id":2,"op":"release"}`)
	ask(a, 3, `{"id":3,"op":"close"}`)
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("worker after close: %v, want exit 0", err)
	}
	b.in.Close()
	if err := b.cmd.Wait(); err != nil {
		t.Fatalf("worker after EOF: %v, want exit 0", err)
	}
}
