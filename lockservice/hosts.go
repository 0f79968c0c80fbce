package lockservice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// NSHost is a server's host in a network namespace of this machine, on the run's own
// network (internal/netns): today the only kind of nemesis.ServerHost. The server is a
// child process of the harness, in its own process group; its files are in the run
// directory.
type NSHost struct {
	id   int
	ns   netns.Host
	argv []string // the server's command line
	log  string   // the server's log file; every start appends to it

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

var _ nemesis.ServerHost = (*NSHost)(nil)

// NewNSHost is the host of server id (from 1) in namespace ns: argv its command
// line, log the file its output is appended to.
func NewNSHost(id int, ns netns.Host, argv []string, log string) *NSHost {
	return &NSHost{id: id, ns: ns, argv: argv, log: log}
}

// NS is the namespace the server runs in.
func (h *NSHost) NS() netns.Host { return h.ns }

// String is the namespace's name.
func (h *NSHost) String() string { return h.ns.Netns }

// Addr is the namespace's address on the run's bridge.
func (h *NSHost) Addr() netip.Addr { return h.ns.Addr }

// TablePrefix: the namespace is the run's own, so the nemesis's tables need no more.
func (h *NSHost) TablePrefix() string { return nemesis.TablePrefix }

// Start starts the server in the namespace, its output appended to its log.
func (h *NSHost) Start(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd != nil && !h.exited() {
		return fmt.Errorf("server %d is still running", h.id)
	}
	logf, err := os.OpenFile(h.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := h.ns.Command(h.argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start server %d: %w", h.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	h.cmd, h.done = cmd, done
	return nil
}

// Pid is the server's process id, or 0 when it is not running.
func (h *NSHost) Pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil || h.exited() {
		return 0
	}
	return h.cmd.Process.Pid
}

func (h *NSHost) exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// Kill SIGKILLs the server's process group (a stopped process dies of SIGKILL too)
// and waits for it to exit.
func (h *NSHost) Kill(context.Context) error {
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return nil
}

// Signal sends sig to the server's process group.
func (h *NSHost) Signal(_ context.Context, sig syscall.Signal) error {
	pid := h.Pid()
	if pid == 0 {
		return fmt.Errorf("server %d: %w", h.id, nemesis.ErrNotRunning)
	}
	if pid <= 1 || pid == os.Getpid() || pid == syscall.Getpgrp() {
		return fmt.Errorf("refusing to signal process group %d", pid)
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("server %d: %w", h.id, nemesis.ErrNotRunning)
		}
		return fmt.Errorf("signal %s to process group %d: %w", sig, pid, err)
	}
	return nil
}

// Exec runs argv in the namespace; a namespace that is gone gives nemesis.ErrHostGone
// (netns.ErrGone).
func (h *NSHost) Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	return netns.Exec(ctx, h.ns.Netns, stdin, argv...)
}

// LogTail reads the last n lines of the server's log file.
func (h *NSHost) LogTail(_ context.Context, n int) ([]string, error) {
	return readTail(h.log, n)
}

// readTail returns the last n lines of a file.
func readTail(path string, n int) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}

// TailLines is readTail for a message: an error becomes the one line.
func TailLines(path string, n int) []string {
	lines, err := readTail(path, n)
	if err != nil {
		return []string{"(" + err.Error() + ")"}
	}
	return lines
}

// InNamespaces is what every kind whose servers the tool starts in the run's
// namespaces shares: the run network, a Service's Managed (true) and Dial (from the
// network's hub). A kind's service embeds it.
type InNamespaces struct {
	Net *netns.Network
}

// Managed is true: the tool starts and stops every server.
func (InNamespaces) Managed() bool { return true }

// Dial opens a TCP connection from the harness (the run network's hub) to addr.
func (s InNamespaces) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return s.Net.Dial(ctx, addr, timeout)
}
