// Package sshnode is the control path to a real host over SSH (golang.org/x/crypto/ssh,
// no ssh binary): dial a node with a user, a key and a port, checking its host key
// against a known_hosts file (or, explicitly, not at all); run a command on it with
// stdin and get its combined output and exit status; read and write files (cat and a
// rename, no sftp). A node whose connection dropped is redialled on its next command;
// see Node.Run for which commands are then retried.
package sshnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DefaultPort is SSH's port.
const DefaultPort = 22

// Config says how to reach the nodes. It is recorded in a run's config.json: it names
// the key file, never holds the key.
type Config struct {
	// User logs in (default root).
	User string `json:"user,omitempty"`
	// KeyFile is the private key's path (default ~/.ssh/id_ed25519, then id_rsa).
	KeyFile string `json:"key_file,omitempty"`
	// Port is sshd's port (default 22).
	Port int `json:"port,omitempty"`
	// KnownHostsFile checks the nodes' host keys (default ~/.ssh/known_hosts).
	KnownHostsFile string `json:"known_hosts_file,omitempty"`
	// InsecureIgnoreHostKeys accepts any host key: only ever an explicit choice.
	InsecureIgnoreHostKeys bool `json:"insecure_ignore_host_keys,omitempty"`
	// DialTimeout bounds one connection attempt (default 10 s).
	DialTimeout time.Duration `json:"dial_timeout_ns,omitempty"`
}

// Defaults fills the unset fields.
func (c Config) Defaults() Config {
	if c.User == "" {
		c.User = "root"
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	home, _ := os.UserHomeDir()
	if c.KeyFile == "" && home != "" {
		c.KeyFile = path.Join(home, ".ssh", "id_ed25519")
		if _, err := os.Stat(c.KeyFile); err != nil {
			c.KeyFile = path.Join(home, ".ssh", "id_rsa")
		}
	}
	if c.KnownHostsFile == "" && !c.InsecureIgnoreHostKeys && home != "" {
		c.KnownHostsFile = path.Join(home, ".ssh", "known_hosts")
	}
	return c
}

// Validate reports a configuration that cannot work, naming the flag.
func (c Config) Validate() error {
	switch {
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("ssh-port: want 1 to 65535, got %d", c.Port)
	case c.KnownHostsFile != "" && c.InsecureIgnoreHostKeys:
		return errors.New("ssh-known-hosts and ssh-insecure-ignore-host-keys: give one, not both")
	case strings.ContainsAny(c.User, " \t\n'\"$;"):
		return fmt.Errorf("ssh-user: %q is not a user name", c.User)
	}
	return nil
}

// clientConfig reads the key and the known hosts (Defaults applied).
func (c Config) clientConfig() (*ssh.ClientConfig, error) {
	key, err := os.ReadFile(c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("ssh-key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("ssh-key %s: %w", c.KeyFile, err)
	}
	cc := &ssh.ClientConfig{User: c.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, Timeout: c.DialTimeout}
	if c.InsecureIgnoreHostKeys {
		cc.HostKeyCallback = ssh.InsecureIgnoreHostKey()
		return cc, nil
	}
	if c.KnownHostsFile == "" {
		return nil, errors.New("ssh: no known_hosts file: give --ssh-known-hosts FILE or --ssh-insecure-ignore-host-keys")
	}
	cb, err := knownhosts.New(c.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("ssh-known-hosts: %w", err)
	}
	cc.HostKeyCallback = cb
	return cc, nil
}

// Node is one host reached over SSH. Its methods are safe for concurrent use; every
// command runs in a session of its own on one shared connection.
type Node struct {
	name string // the host as given (name or address)
	addr string // host:port
	cc   *ssh.ClientConfig

	mu     sync.Mutex
	client *ssh.Client
	closed bool
}

// Dial connects to host (a name or an address) with cfg (Defaults applied here).
func Dial(ctx context.Context, host string, cfg Config) (*Node, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc, err := cfg.clientConfig()
	if err != nil {
		return nil, err
	}
	n := &Node{name: host, addr: net.JoinHostPort(host, strconv.Itoa(cfg.Port)), cc: cc}
	if _, err := n.connect(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// String is the host as given.
func (n *Node) String() string { return n.name }

// LocalAddr is this machine's address on the connection to the node: where the node
// sees this machine's connections (and the workers' masqueraded traffic) come from.
func (n *Node) LocalAddr(ctx context.Context) (net.Addr, error) {
	c, err := n.connect(ctx)
	if err != nil {
		return nil, err
	}
	return c.LocalAddr(), nil
}

// connect returns the live connection, dialling a new one when there is none.
func (n *Node) connect(ctx context.Context) (*ssh.Client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("ssh %s: node closed", n.name)
	}
	if n.client != nil {
		return n.client, nil
	}
	d := net.Dialer{Timeout: n.cc.Timeout}
	conn, err := d.DialContext(ctx, "tcp", n.addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", n.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(n.cc.Timeout))
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, n.addr, n.cc)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh %s: %w", n.addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	c := ssh.NewClient(sc, chans, reqs)
	n.client = c
	go n.forget(c)
	return c, nil
}

// forget drops c once its connection is gone, so the next command redials.
func (n *Node) forget(c *ssh.Client) {
	_ = c.Wait()
	n.drop(c)
}

func (n *Node) drop(c *ssh.Client) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client == c {
		n.client = nil
	}
	c.Close()
}

// Close closes the connection; the node cannot be used afterwards.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.client == nil {
		return nil
	}
	err := n.client.Close()
	n.client = nil
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Cmd is a shell command to run on a node.
type Cmd struct {
	// Script is run by the login user's shell (sh -c); build it with Quote.
	Script string
	// Stdin is fed to it.
	Stdin []byte
	// Idempotent says that running it twice does no harm (a read, an nft table
	// replaced atomically, a kill of what a pid file names): a command that may have
	// started when the connection dropped is retried once on a new connection only
	// then.
	Idempotent bool
	// What says what the command is for, in errors ("start server 2").
	What string
}

// Error is a command that failed on a node: which node, what was attempted, its exit
// status (-1 when it has none: the connection broke) and its output (stdout and
// stderr).
type Error struct {
	Node   string
	What   string
	Status int
	Output string
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s", e.What, e.Node)
	if e.Status >= 0 {
		fmt.Fprintf(&b, ": exit status %d", e.Status)
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if out := strings.TrimSpace(e.Output); out != "" {
		b.WriteString(": " + lastLines(out, 10))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ExitStatus returns the remote exit status err carries (ok false when it has none).
func ExitStatus(err error) (int, bool) {
	var e *Error
	if errors.As(err, &e) && e.Status >= 0 {
		return e.Status, true
	}
	return 0, false
}

// Run runs cmd and returns its combined output. A nonzero exit is an *Error with the
// status and output. When the node's connection is broken it is redialled: a command
// whose session could not even be opened is always retried once (it never ran); one
// cut off while running is retried once only when cmd.Idempotent. A cancelled ctx
// ends the session (the remote command gets SIGKILL where sshd forwards signals).
func (n *Node) Run(ctx context.Context, cmd Cmd) ([]byte, error) {
	if cmd.What == "" {
		cmd.What = firstWord(cmd.Script)
	}
	out, started, err := n.runOnce(ctx, cmd)
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	if _, exited := ExitStatus(err); exited || (started && !cmd.Idempotent) {
		return out, err
	}
	out2, _, err2 := n.runOnce(ctx, cmd)
	if err2 != nil {
		return out2, fmt.Errorf("%w (retried on a new connection after: %v)", err2, err)
	}
	return out2, nil
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return "command"
}

// runOnce runs cmd in a new session; started says whether the command may have
// started (the session opened).
func (n *Node) runOnce(ctx context.Context, cmd Cmd) (out []byte, started bool, err error) {
	fail := func(status int, out []byte, err error) error {
		return &Error{Node: n.name, What: cmd.What, Status: status, Output: string(out), Err: err}
	}
	c, err := n.connect(ctx)
	if err != nil {
		return nil, false, fail(-1, nil, err)
	}
	sess, err := c.NewSession()
	if err != nil {
		n.drop(c)
		return nil, false, fail(-1, nil, err)
	}
	defer sess.Close()
	var buf syncBuffer
	sess.Stdout, sess.Stderr = &buf, &buf
	sess.Stdin = bytes.NewReader(cmd.Stdin)
	if err := sess.Start(cmd.Script); err != nil {
		return nil, true, fail(-1, nil, err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.Signal(ssh.SIGKILL)
		sess.Close()
		<-done
		return buf.Bytes(), true, fail(-1, buf.Bytes(), ctx.Err())
	}
	out = buf.Bytes()
	if err == nil {
		return out, true, nil
	}
	var exit *ssh.ExitError
	if errors.As(err, &exit) {
		return out, true, fail(exit.ExitStatus(), out, nil)
	}
	// No exit status: the connection broke under the command.
	n.drop(c)
	return out, true, fail(-1, out, err)
}

// syncBuffer is a bytes.Buffer for stdout and stderr written from two goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

var _ io.Writer = (*syncBuffer)(nil)

// Exec runs argv (each word quoted) with stdin and returns its combined output; it is
// retried like an idempotent Cmd.
func (n *Node) Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	return n.Run(ctx, Cmd{Script: QuoteArgv(argv), Stdin: stdin, Idempotent: true, What: strings.Join(argv, " ")})
}

// ReadFile returns a file's content.
func (n *Node) ReadFile(ctx context.Context, file string) ([]byte, error) {
	return n.Run(ctx, Cmd{Script: "cat " + Quote(file), Idempotent: true, What: "read " + file})
}

// WriteFile writes data to file (mode perm), making its directory: it writes a
// temporary file and renames it, so a retried or interrupted write leaves the old
// content or the new one.
func (n *Node) WriteFile(ctx context.Context, file string, data []byte, perm os.FileMode) error {
	tmp := file + ".zlc-tmp"
	script := fmt.Sprintf("mkdir -p %s && cat > %s && chmod %o %s && mv -f %s %s",
		Quote(path.Dir(file)), Quote(tmp), perm.Perm(), Quote(tmp), Quote(tmp), Quote(file))
	_, err := n.Run(ctx, Cmd{Script: script, Stdin: data, Idempotent: true, What: "write " + file})
	return err
}

// Quote quotes s for a POSIX shell: single quotes, with each ' written as '\”.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// QuoteArgv quotes each word of argv and joins them with spaces.
func QuoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}
