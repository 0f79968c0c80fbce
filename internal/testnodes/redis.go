package testnodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// redisPort is the test Redis's port: not 6379, so that a --connect run must take
// the port from its address.
const redisPort = 6390

// StartRedis starts a redis-server (Debian's) on node 1's address, in its
// namespace, outside any tool's management, with requirepass when password is set,
// and no persistence; stop kills it. The password goes on the server's command
// line only (this is a test's server), never into a file.
func (n *Nodes) StartRedis(ctx context.Context, dir, password string) (addr string, stop func() error, err error) {
	return n.StartRedisAt(ctx, dir, password, 0, "")
}

// StartRedisAt is StartRedis on port (0: the test port, 6390), a replica of
// primary ("host:port", with the same password) unless primary is "".
func (n *Nodes) StartRedisAt(ctx context.Context, dir, password string, port int, primary string) (addr string, stop func() error, err error) {
	if port == 0 {
		port = redisPort
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	a := netip.AddrPortFrom(n.Addrs[0], uint16(port)).String()
	argv := []string{"ip", "netns", "exec", n.nets[0], "redis-server", "--bind", n.Addrs[0].String(), "--port", fmt.Sprint(port),
		"--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no"}
	if password != "" {
		argv = append(argv, "--requirepass", password, "--masterauth", password)
	}
	if primary != "" {
		host, p, _ := strings.Cut(primary, ":")
		argv = append(argv, "--replicaof", host, p)
	}
	stop, err = startProcess(argv, filepath.Join(dir, "server.log"))
	if err != nil {
		return "", nil, fmt.Errorf("testnodes: start redis-server: %w", err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if pingRedis(ctx, a, password) == nil {
			return a, stop, nil
		}
		if time.Now().After(deadline) {
			return "", nil, errors.Join(fmt.Errorf("testnodes: redis-server on %s does not answer PING", a), stop())
		}
	}
}

// pingRedis sends AUTH (when password is set) and PING to the Redis at addr.
func pingRedis(ctx context.Context, addr, password string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	cmds := "PING\r\n"
	if password != "" {
		cmds = "AUTH " + password + "\r\n" + cmds
	}
	if _, err := c.Write([]byte(cmds)); err != nil {
		return err
	}
	buf := make([]byte, 256)
	got := ""
	for !strings.Contains(got, "PONG") {
		k, err := c.Read(buf)
		if err != nil {
			return err
		}
		got += string(buf[:k])
	}
	return nil
}

// startProcess starts argv in its own process group (killed if the test's process
// dies), its output in a new file log; stop kills the group and waits.
func startProcess(argv []string, log string) (stop func() error, err error) {
	logf, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}, nil
}
