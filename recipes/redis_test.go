package recipes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// The Redis recipe tests start private redis-server processes (Debian's, from the
// redis-server package) on 127.0.0.1, one per instance, with no persistence.
//
// They do not use lockservicetest.Start, on purpose: the recipes run in the test's
// own process, in the host's namespace, and a Redis recipe dials its addresses itself
// (no dial hook, unlike the SQL recipes, which db_test.go dials from a worker
// namespace), while a run network's addresses exist only inside its namespaces. The
// tests also need what only loopback gives cheaply: drop proxies in the test's
// process, a port nobody listens on, a server started late on a chosen port; and no
// root, as the recipe tests on a standalone ZooKeeper (scripts/with-zk.sh).

// redisServerBin is Debian's redis-server (the redis-tools package).
const redisServerBin = "/usr/bin/redis-server"

// requireRedis skips t in -short mode, and without Debian's redis-server unless
// ZLC_REQUIRE_INTEGRATION is set, where its absence fails t.
func requireRedis(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.RedisServer)
}

// redisServer is one private redis-server of a test.
type redisServer struct {
	addr  string
	cmd   *exec.Cmd
	admin *redis.Client
}

// startRedis starts a redis-server on a free port of 127.0.0.1 with no persistence,
// in a directory of its own, and kills it when t ends.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	requireRedis(t)
	var lastErr error
	for range 3 {
		s, err := tryStartRedis(t)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting redis-server: %v", lastErr)
	return nil
}

func tryStartRedis(t *testing.T) (*redisServer, error) {
	return tryStartRedisAt(t, freeAddr(t))
}

// tryStartRedisAt starts a redis-server on addr, as startRedis does, extra added to
// its arguments (with dir for the server's own directory).
func tryStartRedisAt(t *testing.T, addr string, extra ...func(dir string) []string) (*redisServer, error) {
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(addr)
	args := []string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}
	for _, e := range extra {
		args = append(args, e(dir)...)
	}
	cmd := exec.Command(redisServerBin, args...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &redisServer{addr: addr, cmd: cmd, admin: redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})}
	t.Cleanup(func() {
		s.admin.Close()
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.admin.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if cmd.ProcessState != nil {
			break
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	return nil, fmt.Errorf("redis-server on %s did not answer: %s", addr, log)
}

// freeAddr returns a 127.0.0.1 address with a port nobody listens on (as of now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get returns key's value, or "" when it is missing.
func (s *redisServer) get(t *testing.T, key string) string {
	t.Helper()
	v, err := s.admin.Get(context.Background(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// pttl returns key's PTTL (-1: no expiry, -2: missing).
func (s *redisServer) pttl(t *testing.T, key string) time.Duration {
	t.Helper()
	v, err := s.admin.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return v
}

// do runs one command on the server.
func (s *redisServer) do(t *testing.T, args ...any) any {
	t.Helper()
	v, err := s.admin.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// stop and cont pause and resume the server process (SIGSTOP, SIGCONT).
func (s *redisServer) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

func (s *redisServer) cont(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// kill ends the server for good.
func (s *redisServer) kill(t *testing.T) {
	t.Helper()
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// clientIDs returns the ids of the clients CLIENT LIST shows.
func (s *redisServer) clientIDs(t *testing.T) []string {
	t.Helper()
	list, err := s.admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range regexp.MustCompile(`(?m)^id=(\d+) `).FindAllStringSubmatch(list, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		ids = append(ids, FormatSessionID(id))
	}
	return ids
}

// startRedises starts n servers and returns them with their addresses.
func startRedises(t *testing.T, n int) ([]*redisServer, []string) {
	t.Helper()
	var servers []*redisServer
	var addrs []string
	for range n {
		s := startRedis(t)
		servers = append(servers, s)
		addrs = append(addrs, s.addr)
	}
	return servers, addrs
}

// testRedisKey returns a lock key no other test uses, shaped like the harness's.
func testRedisKey(t *testing.T) string {
	return "/zlc-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "/l0"
}

// newTestRedisRecipe builds the recipe made by newRecipe for a test, with a TTL, and
// closes it when the test ends.
func newTestRedisRecipe(t *testing.T, newRecipe Constructor, addrs []string, key string, ttl time.Duration, worker int) (Recipe, *recordedEvents) {
	t.Helper()
	ev := newRecordedEvents()
	cfg := Config{Servers: addrs, SessionTimeout: ttl, Path: key, Kind: workloads.Mutex, Permits: 1,
		Worker: worker, Log: newTestLog(t), Events: ev}
	r, err := newRecipe(context.Background(), cfg)
	if err != nil {
		t.Fatalf("new recipe: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r, ev
}

// acquire runs Acquire with timeout and returns its outcome as Classify says.
func acquire(t *testing.T, r Recipe, timeout time.Duration) (Grant, string, string) {
	t.Helper()
	g, err := r.Acquire(context.Background(), AcquireRequest{Timeout: timeout})
	typ, msg := Classify(err)
	return g, typ, msg
}

func mustAcquire(t *testing.T, r Recipe, what string) Grant {
	t.Helper()
	g, typ, msg := acquire(t, r, 2*time.Second)
	if typ != workloads.ReplyOK {
		t.Fatalf("%s: acquire: %s %q, want ok", what, typ, msg)
	}
	return g
}

func mustRelease(t *testing.T, r Recipe, what string) {
	t.Helper()
	if err := r.Release(context.Background()); err != nil {
		t.Fatalf("%s: release: %v", what, err)
	}
}

// expectTimeout checks that an acquire of r with a short timeout fails "timeout".
func expectTimeout(t *testing.T, r Recipe, what string) {
	t.Helper()
	_, err := r.Acquire(context.Background(), AcquireRequest{Timeout: 150 * time.Millisecond})
	if typ, msg := Classify(err); typ != workloads.ReplyFail || !errors.Is(err, ErrTimeout) {
		t.Fatalf("%s: acquire: %s %q, want fail timeout", what, typ, msg)
	}
}

// waitLost waits up to wait for a lost event.
func waitLost(t *testing.T, ev *recordedEvents, wait time.Duration) string {
	t.Helper()
	select {
	case reason := <-ev.lostCh:
		return reason
	case <-time.After(wait):
		t.Fatalf("no lost event within %v", wait)
	}
	return ""
}

// expectNoLost checks that no lost event comes within wait.
func expectNoLost(t *testing.T, ev *recordedEvents, wait time.Duration) {
	t.Helper()
	select {
	case reason := <-ev.lostCh:
		t.Fatalf("lost %q, want none", reason)
	case <-time.After(wait):
	}
}

// lastSession returns the last session id reported, in the session event's spelling.
func lastSession(t *testing.T, ev *recordedEvents) string {
	t.Helper()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.sessions) == 0 {
		t.Fatal("no session event")
	}
	return FormatSessionID(ev.sessions[len(ev.sessions)-1])
}

// dropProxy forwards TCP connections to a Redis server; armed, it closes the
// client's connection instead of passing on the next reply: the request ran, its
// reply is lost.
type dropProxy struct {
	addr     string
	backend  string
	listener net.Listener
	armed    atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
}

// startDropProxy listens on a free port of 127.0.0.1 until t ends.
func startDropProxy(t *testing.T, backend string) *dropProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{addr: l.Addr().String(), listener: l, backend: backend}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.listener.Close()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go p.accept(l)
	return p
}

func (p *dropProxy) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go p.serve(c, p.backend)
	}
}

// heal accepts connections again, on the same address, after a cut.
func (p *dropProxy) heal(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.listener = l
	p.mu.Unlock()
	go p.accept(l)
}

// cut closes every connection and refuses new ones: the backend becomes unreachable
// through the proxy.
func (p *dropProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listener.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *dropProxy) serve(client net.Conn, backend string) {
	server, err := net.Dial("tcp", backend)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, client, server)
	p.mu.Unlock()
	go func() {
		io.Copy(server, client)
		server.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			break
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	server.Close()
}
