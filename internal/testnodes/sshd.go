package testnodes

import (
	"context"
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

// makeKeys generates the fixture's host key, the client key, authorized_keys and
// known_hosts, with ssh-keygen (openssh-client, a dependency of openssh-server).
func (n *Nodes) makeKeys(ctx context.Context) error {
	hostKey := filepath.Join(n.Dir, "host_ed25519")
	n.KeyFile = filepath.Join(n.Dir, "id_ed25519")
	for _, k := range []string{hostKey, n.KeyFile} {
		os.Remove(k)
		os.Remove(k + ".pub")
		out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "zlockcheck-testnodes", "-f", k).CombinedOutput()
		if err != nil {
			return fmt.Errorf("testnodes: ssh-keygen %s: %w: %s", k, err, out)
		}
	}
	pub, err := os.ReadFile(n.KeyFile + ".pub")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "authorized_keys"), pub, 0o600); err != nil {
		return err
	}
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return err
	}
	f := strings.Fields(string(hostPub))
	if len(f) < 2 {
		return fmt.Errorf("testnodes: bad host key %s.pub", hostKey)
	}
	var kh strings.Builder
	for _, a := range n.Addrs {
		host := a.String()
		if n.Port != 22 {
			host = fmt.Sprintf("[%s]:%d", a, n.Port)
		}
		fmt.Fprintf(&kh, "%s %s %s\n", host, f[0], f[1])
	}
	n.KnownHostsFile = filepath.Join(n.Dir, "known_hosts")
	return os.WriteFile(n.KnownHostsFile, []byte(kh.String()), 0o644)
}

// sshdConfig is node i's sshd_config: its own address and pid file, the fixture's
// host key and authorized keys, root by key only, nothing from /etc/ssh.
func (n *Nodes) sshdConfig(i int) string {
	return strings.Join([]string{
		"# written by zlockcheck's test fixture (internal/testnodes)",
		fmt.Sprintf("ListenAddress %s", netip.AddrPortFrom(n.Addrs[i], uint16(n.Port))),
		"HostKey " + filepath.Join(n.Dir, "host_ed25519"),
		"PidFile " + filepath.Join(n.Dir, fmt.Sprintf("sshd-n%d.pid", i+1)),
		"AuthorizedKeysFile " + filepath.Join(n.Dir, "authorized_keys"),
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no",
		"PrintMotd no",
		"MaxStartups 100",
		"MaxSessions 100",
		"Subsystem sftp internal-sftp",
		"",
	}, "\n")
}

// startSSHD starts node i's sshd in its namespace; its log is sshd-n<i+1>.log.
func (n *Nodes) startSSHD(i int) error {
	conf := filepath.Join(n.Dir, fmt.Sprintf("sshd_config-n%d", i+1))
	if err := os.WriteFile(conf, []byte(n.sshdConfig(i)), 0o600); err != nil {
		return err
	}
	// Debian's sshd wants its privilege separation directory (made by its init
	// script, which never runs here).
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(n.Dir, fmt.Sprintf("sshd-n%d.log", i+1)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", n.nets[i], SSHD, "-D", "-e", "-f", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("testnodes: start sshd on node %d: %w", i+1, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	for len(n.sshd) <= i {
		n.sshd = append(n.sshd, nil)
		n.sshdOut = append(n.sshdOut, nil)
	}
	n.sshd[i], n.sshdOut[i] = cmd, done
	return nil
}

// waitSSHD waits until node i's sshd sends its banner, from the host's namespace.
func (n *Nodes) waitSSHD(ctx context.Context, i int, timeout time.Duration) error {
	addr := netip.AddrPortFrom(n.Addrs[i], uint16(n.Port)).String()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-n.sshdOut[i]:
			return fmt.Errorf("testnodes: sshd on node %d exited: %s", i+1, n.logTail(i))
		default:
		}
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 4)
			_, rerr := c.Read(buf)
			c.Close()
			if rerr == nil && string(buf) == "SSH-" {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("testnodes: sshd on node %d (%s) not answering after %s: %v: %s", i+1, addr, timeout, err, n.logTail(i))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *Nodes) logTail(i int) string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, fmt.Sprintf("sshd-n%d.log", i+1)))
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = s[len(s)-600:]
	}
	return s
}
