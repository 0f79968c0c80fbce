// Package etcd is the etcd kind of lock service: a cluster of 1, 3 or 5 etcd members,
// each in its own namespace of the run's network, started fresh for the run from
// Debian's etcd-server (3.4) or a release built from the Go module proxy
// (--etcd-version, releases.go); what the harness reads of a lock there (the keys
// under the lock's prefix, their create revisions and leases, the live leases); the
// lease revoked as the session-expire fault; and the sweep of members whose run is
// gone.
//
// A worker's session is an etcd lease: the lock's keys are attached to it, its
// client keeps it alive, and the servers delete the keys when it expires or is
// revoked, as ZooKeeper deletes a session's ephemeral nodes. The sessions are named
// "0x<lease id in hex>", the entries of a lock by the part of their key after the
// lock's prefix, in create-revision order (concurrency.Mutex's queue).
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// ClientPort and peerPort are every member's ports.
const (
	ClientPort = 2379
	peerPort   = 2380
)

// confMarker starts every configuration the tool writes: the sweep knows its members
// by it.
const confMarker = "# zlockcheck etcd member"

// Config is the members a run starts.
type Config struct {
	Settings
	// Nodes is the number of members (1, 3 or 5).
	Nodes int
	// Dir receives each member's files (its namespace's name under it).
	Dir string
	// CacheDir is where releases are built (maven.CacheDir's override: "" is the
	// user's cache directory).
	CacheDir string
	// StartTimeout bounds the wait until every member serves (0: 30 s).
	StartTimeout time.Duration
	// Binary, when set, is the server to run in place of Version's (a test's).
	Binary string
}

// Etcd is a running etcd cluster of the tool's.
type Etcd struct {
	lockservice.InNamespaces
	cfg Config
	// Members are the servers, by number from 1, each with its configuration (Conf),
	// log and data directory in its Dir.
	Members []*lockservice.Member

	// external: an existing cluster (ConnectExisting), not the tool's to manage.
	external bool
	// remote holds the members on SSH nodes (StartRemote), nil in namespaces.
	remote *lockservice.Remote

	mu     sync.Mutex
	client *clientv3.Client // the harness's own, from the hub; made on first use
}

var (
	_ lockservice.Service    = (*Etcd)(nil)
	_ nemesis.SessionExpirer = (*Etcd)(nil)
)

// Start creates a namespace per member on net, writes each member's configuration
// and starts them, then waits until every one serves. On error the Etcd returned, if
// not nil, holds what was started so far: Close it.
func Start(ctx context.Context, net *netns.Network, cfg Config, runID string) (*Etcd, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if err := validateNodes(cfg.Nodes); err != nil {
		return nil, err
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	bin, err := cfg.serverBinary()
	if err != nil {
		return nil, err
	}
	e := &Etcd{InNamespaces: lockservice.InNamespaces{Net: net}, cfg: cfg}
	for id := 1; id <= cfg.Nodes; id++ {
		m, err := e.addMember(ctx, id, bin, runID)
		if err != nil {
			return e, err
		}
		e.Members = append(e.Members, m)
	}
	for _, m := range e.Members {
		if err := m.Host.Start(ctx); err != nil {
			return e, fmt.Errorf("etcd member %d: %w", m.ID, err)
		}
	}
	return e, e.WaitServing(ctx, cfg.StartTimeout)
}

// serverBinary is the server the members run: Binary, or Version's (Debian's, or a
// release built in the cache).
func (c Config) serverBinary() (string, error) {
	if c.Binary != "" {
		return c.Binary, nil
	}
	cache, err := maven.CacheDir(c.CacheDir)
	if err != nil {
		return "", err
	}
	return binary(c.Version, cache)
}

// validateNodes refuses a cluster size etcd's users would not run.
func validateNodes(n int) error {
	if n != 1 && n != 3 && n != 5 {
		return fmt.Errorf("nodes: an etcd cluster here has 1, 3 or 5 members, not %d", n)
	}
	return nil
}

// memberName is member id's name in the cluster.
func memberName(id int) string { return fmt.Sprintf("s%d", id) }

// addMember makes member id's namespace on the network and writes its files.
func (e *Etcd) addMember(ctx context.Context, id int, bin, runID string) (*lockservice.Member, error) {
	ns, err := e.Net.AddHost(ctx, memberName(id), lockservice.ServerAddr(id))
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Join(e.cfg.Dir, ns.Name))
	if err != nil {
		return nil, err
	}
	m := &lockservice.Member{ID: id, Port: ClientPort, Dir: dir,
		Conf: filepath.Join(dir, "etcd.conf.yml"), Log: filepath.Join(dir, "server.log")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	urls := make([]memberURLs, e.cfg.Nodes)
	for i := range urls {
		urls[i] = runURLs(i + 1)
	}
	if err := os.WriteFile(m.Conf, memberConf(id, urls, filepath.Join(dir, "data"), "zlc-"+runID, "for run "+runID), 0o644); err != nil {
		return nil, err
	}
	m.Host = lockservice.NewNSHost(id, ns, []string{bin, "--config-file", m.Conf}, m.Log)
	return m, nil
}

// memberURLs is where a member listens: its client and peer URLs.
type memberURLs struct{ client, peer string }

// runURLs are the URLs of member id of a run, at its namespace's address.
func runURLs(id int) memberURLs { return addrURLs(lockservice.ServerAddr(id)) }

// addrURLs are the URLs of a member listening on address a.
func addrURLs(a netip.Addr) memberURLs {
	return memberURLs{client: fmt.Sprintf("http://%s:%d", a, ClientPort), peer: fmt.Sprintf("http://%s:%d", a, peerPort)}
}

// memberConf is the configuration file (YAML, as --config-file reads it; every
// release from 3.4 on takes these keys) of member id (from 1) of a cluster whose
// members listen at urls; why says for what it was written.
func memberConf(id int, urls []memberURLs, data, token, why string) []byte {
	var peers []string
	for i, u := range urls {
		peers = append(peers, memberName(i+1)+"="+u.peer)
	}
	me := urls[id-1]
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d of %d (zlockcheck wrote it %s)\n", confMarker, id, len(urls), why)
	for _, kv := range [][2]string{
		{"name", memberName(id)},
		{"data-dir", data},
		{"listen-client-urls", me.client},
		{"advertise-client-urls", me.client},
		{"listen-peer-urls", me.peer},
		{"initial-advertise-peer-urls", me.peer},
		{"initial-cluster", strings.Join(peers, ",")},
		{"initial-cluster-state", "new"},
		{"initial-cluster-token", token},
		{"logger", "zap"},
	} {
		fmt.Fprintf(&b, "%s: %q\n", kv[0], kv[1])
	}
	b.WriteString("log-outputs: [stderr]\n")
	return []byte(b.String())
}

// dial opens a TCP connection from the harness to addr: from this process's own
// namespace to a member on an SSH node, else from the run network's hub.
func (e *Etcd) dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	if e.remote != nil {
		return lockservice.RootDial(ctx, addr, timeout)
	}
	return e.Net.Dial(ctx, addr, timeout)
}

// dialer is the gRPC dial option of the harness's clients: e.dial, bounded by
// timeout.
func (e *Etcd) dialer(timeout time.Duration) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return e.dial(ctx, addr, timeout) })
}

// Connect is every member's client address, host:2379,...
func (e *Etcd) Connect() string { return strings.Join(lockservice.ClientAddrs(e.Members), ",") }

// Nodes are the members as the nemesis addresses them.
func (e *Etcd) Nodes() []nemesis.Server { return lockservice.Nodes(e.Members) }

// ServerOf: etcd does not say which member a client's connection is on.
func (e *Etcd) ServerOf(context.Context, netip.Addr, string) (int, bool) { return 0, false }

// httpGet asks member m's client URL for path (/health, /version) from the hub and
// decodes its JSON answer into v.
func (e *Etcd) httpGet(ctx context.Context, m *lockservice.Member, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
	defer cancel()
	c := http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return e.dial(ctx, addr, lockservice.OpTimeout)
		}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.ClientAddr()+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, strings.TrimSpace(string(body)), err)
	}
	return nil
}

// serving is nil when member m runs, says it is healthy (/health: it has a leader
// and answers a linearizable read), and is who it should be: the server at its
// address is the member of its name in a cluster of the run's size (another process
// that answers there is not the member).
func (e *Etcd) serving(ctx context.Context, m *lockservice.Member) error {
	if !e.external && m.Host.Pid() == 0 {
		return errors.New("not running")
	}
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := e.httpGet(ctx, m, "/health", &h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("/health says %q %s", h.Health, h.Reason)
	}
	if e.external {
		return nil // its members' names are its owners'
	}
	return e.isMember(ctx, m)
}

// isMember is nil when the server at m's address is member m of the cluster.
func (e *Etcd) isMember(ctx context.Context, m *lockservice.Member) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientAddr()}, DialTimeout: lockservice.OpTimeout, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{e.dialer(lockservice.OpTimeout)}})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	defer cancel()
	st, err := c.Status(ctx, m.ClientAddr())
	if err != nil {
		return err
	}
	ml, err := c.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, mm := range ml.Members {
		if mm.ID == st.Header.MemberId && mm.Name == memberName(m.ID) && len(ml.Members) == len(e.Members) {
			return nil
		}
	}
	return fmt.Errorf("the etcd at %s is not member %s of a cluster of %d (another process holds its address?)", m.ClientAddr(), memberName(m.ID), len(e.Members))
}

// WaitServing waits until every member serves. A member that exited, or the
// timeout, is an error naming each member that does not serve, why, and the tail of
// its log.
func (e *Etcd) WaitServing(ctx context.Context, timeout time.Duration) error {
	checks := make([]lockservice.ServerCheck, len(e.Members))
	for i, m := range e.Members {
		checks[i] = m.Check("member", func(ctx context.Context) error { return e.serving(ctx, m) })
	}
	return lockservice.WaitServing(ctx, timeout, 100*time.Millisecond, "etcd not serving", "not every member serves", func() lockservice.ServingPoll {
		return lockservice.Poll(ctx, checks)
	})
}

// Version is what the first member that answers says it runs (/version's
// etcdserver), "" when none answers.
func (e *Etcd) Version(ctx context.Context) string {
	for _, m := range e.Members {
		var v struct {
			Server string `json:"etcdserver"`
		}
		if err := e.httpGet(ctx, m, "/version", &v); err == nil && v.Server != "" {
			return v.Server
		}
	}
	return ""
}

// admin is the harness's own client of the cluster, dialled from the hub, made on
// first use.
func (e *Etcd) admin() (*clientv3.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		return e.client, nil
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   lockservice.ClientAddrs(e.Members),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{e.dialer(2 * time.Second)},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: the harness's client: %w", err)
	}
	e.client = c
	return c, nil
}

// Leader is the member the members that answer say leads (Status), if any.
func (e *Etcd) Leader(ctx context.Context) (int, bool) {
	c, err := e.admin()
	if err != nil {
		return 0, false
	}
	for _, m := range e.Members {
		sctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
		st, err := c.Status(sctx, m.ClientAddr())
		cancel()
		if err == nil && st.Header != nil && st.Leader != 0 && st.Header.MemberId == st.Leader {
			return m.ID, true
		}
	}
	return 0, false
}

// Close kills every member and closes the harness's client. The members' files
// stay in the run directory.
func (e *Etcd) Close() error {
	e.mu.Lock()
	c := e.client
	e.client = nil
	e.mu.Unlock()
	var errs []error
	if c != nil {
		errs = append(errs, c.Close())
	}
	switch {
	case e.remote != nil:
		errs = append(errs, e.closeRemote())
	case !e.external:
		for _, m := range e.Members {
			errs = append(errs, m.Host.Kill(context.Background()))
		}
	}
	err := errors.Join(errs...)
	if errors.Is(err, context.Canceled) {
		return nil // the client's close says so of its own streams
	}
	return err
}
