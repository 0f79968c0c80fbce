package sshnode

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// fakeSSHD is a test-only SSH server on 127.0.0.1: it accepts one client key and runs
// each "exec" request with the local sh. It can drop every connection (drop), to
// test the redial.
type fakeSSHD struct {
	ln      net.Listener
	hostKey ssh.Signer
	mu      sync.Mutex
	conns   []net.Conn
}

func newKey(t *testing.T) (ssh.Signer, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, pem.EncodeToMemory(block)
}

// startFake starts a server and returns it with a Config that reaches it.
func startFake(t *testing.T) (*fakeSSHD, Config) {
	t.Helper()
	dir := t.TempDir()
	hostKey, _ := newKey(t)
	clientKey, clientPEM := newKey(t)
	keyFile := filepath.Join(dir, "id")
	if err := os.WriteFile(keyFile, clientPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	kh := filepath.Join(dir, "known_hosts")
	line := "[127.0.0.1]:" + strconv.Itoa(port) + " " + string(ssh.MarshalAuthorizedKey(hostKey.PublicKey()))
	if err := os.WriteFile(kh, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fakeSSHD{ln: ln, hostKey: hostKey}
	sc := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(clientKey.PublicKey().Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	sc.AddHostKey(hostKey)
	go f.serve(sc)
	t.Cleanup(func() { ln.Close(); f.drop() })
	return f, Config{User: "test", KeyFile: keyFile, Port: port, KnownHostsFile: kh}
}

func (f *fakeSSHD) serve(sc *ssh.ServerConfig) {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		go func() {
			_, chans, reqs, err := ssh.NewServerConn(c, sc)
			if err != nil {
				return
			}
			go ssh.DiscardRequests(reqs)
			for nc := range chans {
				ch, creqs, err := nc.Accept()
				if err != nil {
					continue
				}
				go session(ch, creqs)
			}
		}()
	}
}

// session runs the first exec request of a channel with sh -c.
func session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(false, nil)
			continue
		}
		var p struct{ Command string }
		_ = ssh.Unmarshal(req.Payload, &p)
		_ = req.Reply(true, nil)
		cmd := exec.Command("sh", "-c", p.Command)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		status := 0
		if err := cmd.Run(); err != nil {
			status = 255
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				status = ee.ExitCode()
			}
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
		return
	}
}

// drop closes every connection the server has.
func (f *fakeSSHD) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func TestRunExecFiles(t *testing.T) {
	f, cfg := startFake(t)
	_ = f
	ctx := context.Background()
	n, err := Dial(ctx, "127.0.0.1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	out, err := n.Exec(ctx, []byte("fed in"), "sh", "-c", `printf '%s|' "$0" "$1"; cat`, "it's a $HOME", "two words")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "it's a $HOME|two words|fed in"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	_, err = n.Run(ctx, Cmd{Script: "echo oops >&2; exit 3", What: "fail on purpose"})
	if st, ok := ExitStatus(err); !ok || st != 3 || !strings.Contains(err.Error(), "oops") || !strings.Contains(err.Error(), "fail on purpose on 127.0.0.1") {
		t.Fatalf("error %v: want exit status 3 naming the node, the command and its stderr", err)
	}
	file := filepath.Join(t.TempDir(), "sub", "zoo.cfg")
	if err := n.WriteFile(ctx, file, []byte("a'b\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	data, err := n.ReadFile(ctx, file)
	if err != nil || string(data) != "a'b\n" {
		t.Fatalf("read back %q, %v", data, err)
	}
}

func TestRedialAfterDrop(t *testing.T) {
	f, cfg := startFake(t)
	ctx := context.Background()
	n, err := Dial(ctx, "127.0.0.1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	f.drop()
	time.Sleep(50 * time.Millisecond)
	out, err := n.Exec(ctx, nil, "echo", "back")
	if err != nil || string(out) != "back\n" {
		t.Fatalf("after a dropped connection: %q, %v", out, err)
	}
	// A command cut off while running is not retried unless idempotent.
	go func() { time.Sleep(200 * time.Millisecond); f.drop() }()
	_, err = n.Run(ctx, Cmd{Script: "sleep 2", What: "long"})
	if err == nil {
		t.Fatal("a command whose connection dropped under it succeeded")
	}
	if _, ok := ExitStatus(err); ok {
		t.Fatalf("want no exit status for a dropped connection, got %v", err)
	}
}

func TestHostKeyChecked(t *testing.T) {
	_, cfg := startFake(t)
	other := filepath.Join(t.TempDir(), "known_hosts")
	k, _ := newKey(t)
	_ = os.WriteFile(other, []byte("[127.0.0.1]:"+strconv.Itoa(cfg.Port)+" "+string(ssh.MarshalAuthorizedKey(k.PublicKey()))), 0o644)
	cfg.KnownHostsFile = other
	if _, err := Dial(context.Background(), "127.0.0.1", cfg); err == nil || !strings.Contains(err.Error(), "key") {
		t.Fatalf("dial with a wrong known host key: %v", err)
	}
	cfg.KnownHostsFile, cfg.InsecureIgnoreHostKeys = "", true
	n, err := Dial(context.Background(), "127.0.0.1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{"abc": "abc", "": "''", "a b": "'a b'", "it's": `'it'\''s'`, "/x/y=1": "/x/y=1"} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
