package nemesis_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// The integration tests run ZooKeeper clients as separate processes inside worker
// namespaces: this test binary again, in helper mode (helperEnv set). A helper opens a
// go-zookeeper session, creates an ephemeral node, reports its session id and
// password on stdout, then reports every session state change until it is killed.

const helperEnv = "ZLC_NEMESIS_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// helperMsg is one line a helper writes.
type helperMsg struct {
	Event   string `json:"event"` // "session" or "state"
	Session string `json:"session,omitempty"`
	Passwd  string `json:"passwd,omitempty"`
	State   string `json:"state,omitempty"`
	Server  string `json:"server,omitempty"`
	Error   string `json:"error,omitempty"`
}

func helperMain() int {
	servers := strings.Split(os.Getenv("ZLC_HELPER_SERVERS"), ",")
	timeout, err := time.ParseDuration(os.Getenv("ZLC_HELPER_SESSION_TIMEOUT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	path := os.Getenv("ZLC_HELPER_PATH")
	enc := json.NewEncoder(os.Stdout)
	conn, events, err := zk.Connect(servers, timeout, zk.WithLogger(log.New(os.Stderr, "zk: ", log.Lmicroseconds)))
	if err != nil {
		_ = enc.Encode(helperMsg{Event: "error", Error: err.Error()})
		return 1
	}
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	if _, err := conn.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		_ = enc.Encode(helperMsg{Event: "error", Error: err.Error()})
		return 1
	}
	_ = enc.Encode(helperMsg{Event: "session", Session: fmt.Sprintf("0x%x", conn.SessionID()),
		Passwd: base64.StdEncoding.EncodeToString(sessionPasswd(conn)), Server: conn.Server()})
	for ev := range events {
		_ = enc.Encode(helperMsg{Event: "state", State: ev.State.String(), Server: ev.Server,
			Session: fmt.Sprintf("0x%x", conn.SessionID())})
	}
	return 0
}

// sessionPasswd reads go-zookeeper's unexported session password. TEST ONLY: the
// library offers no way to get it, and a real worker reports its own.
func sessionPasswd(c *zk.Conn) []byte {
	f := reflect.ValueOf(c).Elem().FieldByName("passwd")
	b := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Bytes()
	return append([]byte(nil), b...)
}

// helper is a running helper process.
type helper struct {
	host netns.Host
	cmd  *exec.Cmd
	pid  int
	path string

	mu     sync.Mutex
	msgs   []helperMsg
	notify chan struct{}
	exited chan struct{}
	stderr bytes.Buffer
}

// startHelper starts a helper in host's namespace whose ephemeral node is path, and
// waits until it reports its session.
func startHelper(t *testing.T, host netns.Host, connect string, timeout time.Duration, path string) *helper {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := host.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "ZLC_HELPER_SERVERS="+connect,
		"ZLC_HELPER_SESSION_TIMEOUT="+timeout.String(), "ZLC_HELPER_PATH="+path)
	h := &helper{host: host, cmd: cmd, path: path, notify: make(chan struct{}, 1), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &h.mu, w: &h.stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.pid = cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m helperMsg
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				h.mu.Lock()
				h.msgs = append(h.msgs, m)
				h.mu.Unlock()
				select {
				case h.notify <- struct{}{}:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(h.stop)
	if _, ok := h.waitFor(20*time.Second, func(m helperMsg) bool { return m.Event == "session" || m.Event == "error" }); !ok {
		t.Fatalf("helper in %s did not report a session; stderr:\n%s", host.Netns, h.log())
	}
	if m := h.session(); m.Event != "session" {
		t.Fatalf("helper in %s failed: %s; stderr:\n%s", host.Netns, m.Error, h.log())
	}
	return h
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *helper) log() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// session is the helper's first report.
func (h *helper) session() helperMsg {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.msgs) == 0 {
		return helperMsg{}
	}
	return h.msgs[0]
}

// states lists the session states the helper reported, in order.
func (h *helper) states() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range h.msgs {
		if m.Event == "state" {
			out = append(out, m.State)
		}
	}
	return out
}

// waitFor waits until some message satisfies pred.
func (h *helper) waitFor(timeout time.Duration, pred func(helperMsg) bool) (helperMsg, bool) {
	deadline := time.After(timeout)
	for {
		h.mu.Lock()
		for _, m := range h.msgs {
			if pred(m) {
				h.mu.Unlock()
				return m, true
			}
		}
		h.mu.Unlock()
		select {
		case <-h.notify:
		case <-h.exited:
			return helperMsg{}, false
		case <-deadline:
			return helperMsg{}, false
		}
	}
}

// state is the helper's process state from /proc/PID/stat ("" if it is gone).
func (h *helper) state() string { return procState(h.pid) }

func (h *helper) alive() bool {
	select {
	case <-h.exited:
		return false
	default:
	}
	s := h.state()
	return s != "" && s != "Z" && s != "X"
}

func (h *helper) stop() {
	_ = syscall.Kill(-h.pid, syscall.SIGKILL)
	<-h.exited
}

// procState reads the state field of /proc/PID/stat.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, so cut at the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// observer is a ZooKeeper client in the harness's own namespace (the hub), which
// client faults do not touch.
func observer(t *testing.T, nw *netns.Network, connect string) *zk.Conn {
	t.Helper()
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		return nw.Dial(context.Background(), addr, timeout)
	}
	conn, _, err := zk.Connect(strings.Split(connect, ","), 20*time.Second, zk.WithDialer(dial),
		zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}
