// Package toykind is a toy kind of lock service, for tests only: it shows that a new
// kind plugs into the whole tool with one package and one registration line (its
// init), and no edit anywhere else. Its "servers" are a directory of this machine
// whose files the workers flock: the kernel keeps the locks, and a worker's lock goes
// when its process does. Workers in their own network namespaces still share the
// file system, so a real harness.Test runs on it with real worker processes, such as
// conformance/testdata/fake_worker.py, whose init's connect is that directory. It
// has no servers to fault: only the client faults run on it.
package toykind

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Name is the toy kind's name (--service takes it where this package is linked).
const Name kind.Name = "zlc-toy"

func init() {
	lockservice.Register(kind.Kind{Name: Name, Title: "a toy flock directory", Nodes: 1}, start)
}

// service is the directory the workers lock files in.
type service struct{ dir string }

var _ lockservice.Service = (*service)(nil)

// start makes the directory under the run's servers' directory.
func start(_ context.Context, _ *netns.Network, cfg lockservice.Config, _ string) (lockservice.Service, error) {
	dir := filepath.Join(cfg.Dir, "zlc-toy")
	if cfg.Dir == "" {
		return nil, errors.New("toy service: no directory (lockservice.Config.Dir)")
	}
	abs, err := filepath.Abs(dir) // workers run elsewhere than in the harness's directory
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	return &service{dir: abs}, nil
}

// Connect is the directory: init's connect.
func (s *service) Connect() string { return s.dir }

// Nodes is none: there is no server to fault.
func (s *service) Nodes() []nemesis.Server { return nil }

// Leader: none.
func (s *service) Leader(context.Context) (int, bool) { return 0, false }

// ServerOf: no client is on a server.
func (s *service) ServerOf(context.Context, netip.Addr, string) (int, bool) { return 0, false }

// Dial: there is no server to dial.
func (s *service) Dial(context.Context, string, time.Duration) (net.Conn, error) {
	return nil, errors.New("toy service: no server to dial")
}

// WaitServing: a directory serves at once.
func (s *service) WaitServing(context.Context, time.Duration) error { return nil }

// Version is the toy's.
func (s *service) Version(context.Context) string { return "toy" }

// Managed: the tool made the directory.
func (s *service) Managed() bool { return true }

// Close removes the directory.
func (s *service) Close() error { return os.RemoveAll(s.dir) }
