package lockservice

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// SSHHost is a server's host on a real node reached over SSH (sshnode), whatever the
// kind of server. The server is started detached (setsid, nohup) in its node
// directory (dir: its configuration, data, server.log, server.pid); everything else
// reads the pid file and checks that the process it names is this server (its
// command line names its configuration file, or its working directory is in dir)
// before touching it. nft and tc run through sudo -n unless the SSH user is root.
type SSHHost struct {
	id      int
	node    Shell
	addr    netip.Addr   // the node's address: peers and clients reach it there
	peer    netip.Addr   // another server's address, to find the link towards the peers
	clients netip.Prefix // where this machine's (and the workers') traffic comes from
	dir     string       // the server's node directory
	conf    string       // the configuration file its command line names ("" for none)
	argv    []string     // the server's command line
	prefix  string       // the run's nftables table prefix
	sudo    bool

	mu   sync.Mutex
	pid  int    // last known pid of the server (0: not running)
	link string // the interface towards the peers, once found
}

var (
	_ Shell               = (*sshnode.Node)(nil)
	_ nemesis.ServerHost  = (*SSHHost)(nil)
	_ nemesis.HostNetwork = (*SSHHost)(nil)
)

// Exit statuses of the host's scripts.
const (
	exitNotRunning = 3 // the pid file names no running server of this directory
	exitRunning    = 4 // Start: the server is already running
	exitStuck      = 5 // a wait ran out
)

func (h *SSHHost) String() string      { return fmt.Sprintf("s%d@%s", h.id, h.node) }
func (h *SSHHost) Addr() netip.Addr    { return h.addr }
func (h *SSHHost) TablePrefix() string { return h.prefix }

// Clients is this machine's address as the node sees it: the workers' traffic is
// masqueraded to it on its way out.
func (h *SSHHost) Clients() netip.Prefix { return h.clients }

// file is name's path in the server's node directory.
func (h *SSHHost) file(name string) string { return path.Join(h.dir, name) }

// serverPid is a shell fragment that sets $pid to the server's pid and succeeds when
// the pid file names a live process (not a zombie) that is this server: its command
// line names its configuration file, or its working directory is in its node
// directory (a server that rewrites its process title, as redis-server does).
func (h *SSHHost) serverPid() string {
	ident := fmt.Sprintf(`case "$(readlink /proc/$pid/cwd 2>/dev/null)/" in %s/*) true;; *) false;; esac`, sshnode.Quote(h.dir))
	if h.conf != "" {
		ident = fmt.Sprintf(`{ grep -qaF %s /proc/$pid/cmdline || %s; }`, sshnode.Quote(h.file(h.conf)), ident)
	}
	return fmt.Sprintf(`{ pid=$(cat %s 2>/dev/null); case "$pid" in ''|*[!0-9]*) false;; *) [ "$pid" -gt 1 ] && `+
		`[ -r /proc/$pid/cmdline ] && %s && ! grep -q '^[0-9]* (.*) Z' /proc/$pid/stat;; esac; }`,
		sshnode.Quote(h.file("server.pid")), ident)
}

func (h *SSHHost) run(ctx context.Context, what, script string, idempotent bool) ([]byte, error) {
	return h.node.Run(ctx, sshnode.Cmd{Script: script, Idempotent: idempotent, What: fmt.Sprintf("%s (server %d)", what, h.id)})
}

// Start starts the server detached in its own session (setsid: its pid leads its
// process group) from its node directory, its output appended to server.log, its pid
// in server.pid. Only the detached command runs in the background, every stream
// redirected: a background list would hold the SSH session's output open, and the
// session, until the server exits. Not retried over a new connection (it may have
// started).
func (h *SSHHost) Start(ctx context.Context) error {
	script := fmt.Sprintf(`if %s; then echo "server already running (pid $pid)" >&2; exit %d; fi
rm -f %[3]s
cd %[7]s || exit %[6]d
setsid sh -c 'echo $$ > "$0"; exec nohup "$@"' %[3]s %[4]s >> %[5]s 2>&1 < /dev/null &
i=0; while [ ! -s %[3]s ]; do i=$((i+1)); if [ $i -gt 200 ]; then echo "no pid file after 10 s" >&2; exit %[6]d; fi; sleep 0.05; done
cat %[3]s`, h.serverPid(), exitRunning, sshnode.Quote(h.file("server.pid")), sshnode.QuoteArgv(h.argv),
		sshnode.Quote(h.file("server.log")), exitStuck, sshnode.Quote(h.dir))
	out, err := h.run(ctx, "start server", script, false)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("start server %d on %s: bad pid %q", h.id, h.node, out)
	}
	h.mu.Lock()
	h.pid = pid
	h.mu.Unlock()
	return nil
}

// Pid is the server's pid, 0 when it is not running: it asks the node whether the
// last known pid still runs (when the node cannot be asked, the last known pid).
func (h *SSHHost) Pid() int {
	h.mu.Lock()
	pid := h.pid
	h.mu.Unlock()
	if pid == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := h.run(ctx, "check server", h.serverPid(), true)
	if st, ok := sshnode.ExitStatus(err); ok && st != 0 {
		h.mu.Lock()
		if h.pid == pid {
			h.pid = 0
		}
		h.mu.Unlock()
		return 0
	}
	return pid
}

// Kill SIGKILLs the server's process group and waits until its leader is gone; a
// server that is not running is left alone. Safe to retry.
func (h *SSHHost) Kill(ctx context.Context) error {
	script := SigGroup + fmt.Sprintf(`if ! %s; then rm -f %s; exit 0; fi
sigGroup KILL $pid || kill -s KILL $pid
i=0; while [ -d /proc/$pid ] && ! grep -q '^[0-9]* (.*) Z' /proc/$pid/stat 2>/dev/null; do i=$((i+1)); if [ $i -gt 200 ]; then echo "process $pid still alive 10 s after SIGKILL" >&2; exit %d; fi; sleep 0.05; done
rm -f %[2]s`, h.serverPid(), sshnode.Quote(h.file("server.pid")), exitStuck)
	if _, err := h.run(ctx, "kill server", script, true); err != nil {
		return err
	}
	h.mu.Lock()
	h.pid = 0
	h.mu.Unlock()
	return nil
}

// Signal sends sig to the server's process group; ErrNotRunning when it is not
// running.
func (h *SSHHost) Signal(ctx context.Context, sig syscall.Signal) error {
	var name string
	switch sig {
	case syscall.SIGSTOP:
		name = "STOP"
	case syscall.SIGCONT:
		name = "CONT"
	case syscall.SIGKILL:
		name = "KILL"
	case syscall.SIGTERM:
		name = "TERM"
	case syscall.SIGQUIT:
		name = "QUIT"
	default:
		return fmt.Errorf("server %d on %s: signal %s not supported over SSH", h.id, h.node, sig)
	}
	script := SigGroup + fmt.Sprintf("%s || exit %d\nsigGroup %s $pid", h.serverPid(), exitNotRunning, name)
	_, err := h.run(ctx, "signal "+name, script, true)
	if st, ok := sshnode.ExitStatus(err); ok && st == exitNotRunning {
		return fmt.Errorf("server %d on %s: %w", h.id, h.node, nemesis.ErrNotRunning)
	}
	return err
}

// Exec runs argv on the node (nft, tc: through sudo -n unless the user is root).
func (h *SSHHost) Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	if h.sudo {
		argv = append([]string{"sudo", "-n", "--"}, argv...)
	}
	return h.node.Exec(ctx, stdin, argv...)
}

// LogTail returns the last n lines of server.log.
func (h *SSHHost) LogTail(ctx context.Context, n int) ([]string, error) {
	out, err := h.run(ctx, "read log", fmt.Sprintf("tail -n %d %s", n, sshnode.Quote(h.file("server.log"))), true)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n"), nil
}

// Link is the node's interface towards its peers (ip route get), found once.
func (h *SSHHost) Link(ctx context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.link != "" {
		return h.link, nil
	}
	towards := h.peer
	if !towards.IsValid() {
		towards = h.clients.Addr()
	}
	out, err := h.node.Exec(ctx, nil, "ip", "-o", "route", "get", towards.String())
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			h.link = f[i+1]
			return h.link, nil
		}
	}
	return "", fmt.Errorf("%s: no device in `ip route get %s`: %q", h.node, towards, out)
}

// Glob lists the node's files matching each pattern, pattern after pattern, in one
// command.
func (h *SSHHost) Glob(ctx context.Context, patterns ...string) ([]string, error) {
	var b strings.Builder
	for _, p := range patterns {
		dir, base := path.Split(p)
		fmt.Fprintf(&b, "for f in %s%s; do [ -e \"$f\" ] && printf '%%s\\n' \"$f\"; done\n", sshnode.Quote(dir), globQuote(base))
	}
	b.WriteString("true")
	out, err := h.run(ctx, "look for "+strings.Join(patterns, " "), b.String(), true)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" {
			paths = append(paths, l) // a path may hold spaces
		}
	}
	return paths, nil
}

// Where names the node, for errors.
func (h *SSHHost) Where() string { return h.node.String() }

// globQuote quotes a glob's last element for the shell, leaving its * unquoted.
func globQuote(s string) string {
	parts := strings.Split(s, "*")
	for i, p := range parts {
		if p != "" {
			parts[i] = sshnode.Quote(p)
		}
	}
	return strings.Join(parts, "*")
}

// ID is the server's number, from 1.
func (h *SSHHost) ID() int { return h.id }

// Dir is the server's node directory; File a file's path in it.
func (h *SSHHost) Dir() string             { return h.dir }
func (h *SSHHost) File(name string) string { return h.file(name) }

// Sudo reports whether commands that need root go through sudo -n.
func (h *SSHHost) Sudo() bool { return h.sudo }

// SetArgv sets the server's command line, which Start runs in its node directory.
func (h *SSHHost) SetArgv(argv []string) { h.argv = argv }

// Started reports whether the server was given its command line (Prepare went
// through): its files are expected at Close.
func (h *SSHHost) Started() bool { return h.argv != nil }

// Run runs a shell script on the node (what names it in errors; an idempotent one is
// retried over a new connection).
func (h *SSHHost) Run(ctx context.Context, what, script string, idempotent bool) ([]byte, error) {
	return h.run(ctx, what, script, idempotent)
}

// ReadFile reads a file of the node.
func (h *SSHHost) ReadFile(ctx context.Context, file string) ([]byte, error) {
	return h.node.ReadFile(ctx, file)
}

// WriteFile writes data to the file name of the server's node directory (mode perm).
func (h *SSHHost) WriteFile(ctx context.Context, name string, data []byte, perm os.FileMode) error {
	return h.node.WriteFile(ctx, h.file(name), data, perm)
}
