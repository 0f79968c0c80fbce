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
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/fourletter"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// StartT starts an n-node fixture for a test (skipped, or failed under
// ZLC_REQUIRE_INTEGRATION, without root or sshd) and closes it when the test ends.
func StartT(t testing.TB, n int) *Nodes {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2)
	if _, err := os.Stat(SSHD); err != nil {
		if os.Getenv("ZLC_REQUIRE_INTEGRATION") != "" {
			t.Fatalf("%s missing: install openssh-server (make setup)", SSHD)
		}
		t.Skipf("%s missing: install openssh-server (make setup)", SSHD)
	}
	nodes, err := Start(context.Background(), Config{N: n, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nodes.Close(); err != nil {
			t.Errorf("close test nodes: %v", err)
		}
	})
	return nodes
}

// zkPorts are the ports of the fixture's plain ensemble (ZooKeeper's usual ones).
const (
	zkClientPort   = 2181
	zkQuorumPort   = 2888
	zkElectionPort = 3888
)

// StartEnsemble starts a plain ZooKeeper server (Debian's package) in every node's
// namespace, on the node's address, files under dir/n<i>, and waits (up to 60 s)
// until each answers ruok. It returns the client connect string ("addr:2181,...")
// and stop, which kills the servers (Close does too). The zoo.cfg is this package's
// own, not the harness's: it is an ensemble the tool does not manage, as --connect
// meets in the wild.
func (n *Nodes) StartEnsemble(ctx context.Context, dir string) (connect string, stop func() error, err error) {
	cp := "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(cp); err != nil {
		return "", nil, fmt.Errorf("testnodes: %s not found: install Debian's zookeeper package", cp)
	}
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cp += ":/usr/share/java/slf4j-simple.jar"
	}
	var peers, clients []string
	for i, a := range n.Addrs {
		peers = append(peers, fmt.Sprintf("server.%d=%s:%d:%d", i+1, a, zkQuorumPort, zkElectionPort))
		clients = append(clients, netip.AddrPortFrom(a, zkClientPort).String())
	}
	var procs []*exec.Cmd
	stop = func() error {
		var errs []error
		for _, c := range procs {
			if err := syscall.Kill(-c.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, err)
			}
			_ = c.Wait()
		}
		procs = nil
		return errors.Join(errs...)
	}
	for i, a := range n.Addrs {
		c, err := n.startServer(i, a, filepath.Join(dir, fmt.Sprintf("n%d", i+1)), cp, peers)
		if err != nil {
			return "", nil, errors.Join(err, stop())
		}
		procs = append(procs, c)
	}
	for i, a := range clients {
		if err := waitRuok(ctx, a, 60*time.Second); err != nil {
			return "", nil, errors.Join(fmt.Errorf("testnodes: ZooKeeper on node %d: %w", i+1, err), stop())
		}
	}
	return strings.Join(clients, ","), stop, nil
}

// startServer writes node i's zoo.cfg and myid under dir and starts its server.
func (n *Nodes) startServer(i int, addr netip.Addr, dir, classpath string, peers []string) (*exec.Cmd, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), fmt.Appendf(nil, "%d\n", i+1), 0o644); err != nil {
		return nil, err
	}
	cfg := append([]string{
		"tickTime=200", "initLimit=50", "syncLimit=30",
		"dataDir=" + data,
		"clientPortAddress=" + addr.String(),
		fmt.Sprintf("clientPort=%d", zkClientPort),
		"minSessionTimeout=400", "maxSessionTimeout=60000",
		"maxClientCnxns=0", "4lw.commands.whitelist=*", "admin.enableServer=false",
		"standaloneEnabled=false",
	}, peers...)
	conf := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(conf, []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", n.nets[i], "java", "-Xms64m", "-Xmx256m",
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dzookeeper.log.dir="+dir,
		"-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testnodes: start ZooKeeper on node %d: %w", i+1, err)
	}
	return cmd, nil
}

// waitRuok waits until the server at addr answers "ruok" with "imok" and "srvr" with
// a mode (it is part of a quorum).
func waitRuok(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		out, err := fourLetter(ctx, addr, "srvr")
		if err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		last = strings.TrimSpace(out)
		if err != nil {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not serving after %s: %s", addr, timeout, last)
}

func fourLetter(ctx context.Context, addr, word string) (string, error) {
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return fourletter.Ask(c, word)
}
