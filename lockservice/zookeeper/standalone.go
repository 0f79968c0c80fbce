package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/fourletter"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// Standalone is one ZooKeeper server in standalone mode on 127.0.0.1, in the host's
// own network: no root, no namespaces. It serves tests of single workers
// (zlockcheck conformance); a run's ensemble is StartEnsemble's.
type Standalone struct {
	// Addr is the client address, 127.0.0.1:port.
	Addr string
	// Log is the server's output.
	Log  string
	proc *lockservice.LocalProcess
}

// StartStandalone starts a standalone server with cfg's Java, ZKHome, Dir (its
// config, data and log go there), Tick, MaxSessionTimeout, Heap and StartTimeout (the
// other fields are ignored), and waits until it serves. The server dies with this
// process; Stop ends it sooner.
func StartStandalone(ctx context.Context, cfg EnsembleConfig) (*Standalone, error) {
	cfg.defaults()
	cp, err := cfg.classpath(ctx, localFiles{})
	if err != nil {
		return nil, err
	}
	port, err := lockservice.FreeLocalPort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(cfg.Dir, "zoo.cfg")
	lines := []string{
		"# written by zlockcheck (standalone)",
		fmt.Sprintf("tickTime=%d", cfg.Tick.Milliseconds()),
		"dataDir=" + data,
		"clientPortAddress=127.0.0.1",
		fmt.Sprintf("clientPort=%d", port),
		fmt.Sprintf("minSessionTimeout=%d", 2*cfg.Tick.Milliseconds()),
		fmt.Sprintf("maxSessionTimeout=%d", cfg.MaxSessionTimeout.Milliseconds()),
		"maxClientCnxns=0",
		"4lw.commands.whitelist=*",
		"admin.enableServer=false",
	}
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	s := &Standalone{Addr: fmt.Sprintf("127.0.0.1:%d", port), Log: filepath.Join(cfg.Dir, "server.log")}
	if err := s.start(cfg, cp, conf); err != nil {
		return nil, err
	}
	if err := s.waitServing(ctx, cfg.StartTimeout); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Standalone) start(cfg EnsembleConfig, classpath, conf string) error {
	argv := []string{cfg.Java, "-Xms64m", "-Xmx" + cfg.Heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir=" + cfg.Dir,
		"-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", conf}
	p, err := lockservice.StartLocalProcess("standalone ZooKeeper on "+s.Addr, argv, s.Log)
	s.proc = p
	return err
}

// waitServing waits until srvr says "Mode: standalone"; on failure the error carries
// the tail of the server's log.
func (s *Standalone) waitServing(ctx context.Context, timeout time.Duration) error {
	return s.proc.WaitServing(ctx, timeout, func(context.Context) error {
		if !s.serving() {
			return errors.New("srvr does not say Mode: standalone")
		}
		return nil
	})
}

func (s *Standalone) serving() bool {
	conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	text, err := fourletter.Ask(conn, "srvr")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "Mode: standalone" {
			return true
		}
	}
	return false
}

// Stop kills the server and waits for it to exit.
func (s *Standalone) Stop() {
	s.proc.Stop(syscall.SIGKILL, 0)
}
