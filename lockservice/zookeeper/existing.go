package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// An existing ensemble (run --connect) is one the tool does not manage: it starts,
// stops, signals and reconfigures none of its servers. The workers and the harness
// reach them through the run network's uplink (netns.AddUplink); a run writes only
// under its chroot (PrepareRoot), which must not exist before the run and is deleted
// at its end (by the undo PrepareRoot returns).

// DefaultConnectPort is the port of a --connect address that names none.
const DefaultConnectPort = 2181

// ParseConnect splits a connect string (host:port,host:port; a missing port is
// 2181) into host and port pairs, without resolving names.
func ParseConnect(s string) ([]string, error) {
	var out []string
	for _, hp := range strings.Split(s, ",") {
		hp = strings.TrimSpace(hp)
		if hp == "" {
			return nil, fmt.Errorf("connect: empty address in %q", s)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			host, port = hp, strconv.Itoa(DefaultConnectPort)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("connect: %q: bad port", hp)
		}
		if host == "localhost" {
			return nil, fmt.Errorf("connect: %q: a loopback address cannot be reached from the workers' namespaces (each has its own loopback); use an address of one of the host's interfaces", hp)
		}
		if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
			return nil, fmt.Errorf("connect: %q: a loopback address cannot be reached from the workers' namespaces (each has its own loopback); use an address of one of the host's interfaces", hp)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// ConnectEnsemble reaches an existing ensemble: the connect
// addresses resolved once, reached through an uplink added to net, each a Server
// whose host the tool does not manage. It waits until every server listed serves.
func ConnectEnsemble(ctx context.Context, net *netns.Network, connect string, timeout time.Duration) (*Ensemble, error) {
	hostports, err := ParseConnect(connect)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{net: net, external: true}
	var addrs []netip.Addr
	for i, hp := range hostports {
		ap, err := resolve(ctx, hp)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, ap.Addr())
		e.Servers = append(e.Servers, &Server{Member: lockservice.Member{ID: i + 1, Port: int(ap.Port()), Host: existingHost{name: hp, addr: ap}}})
	}
	if err := net.AddUplink(ctx, addrs); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := e.WaitServing(ctx, timeout); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return e, nil
}

// resolve turns host:port into an IPv4 address and port, once.
func resolve(ctx context.Context, hostport string) (netip.AddrPort, error) {
	host, port, _ := net.SplitHostPort(hostport)
	p, _ := strconv.Atoi(port)
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("connect: resolve %s: %v", host, err)
	}
	a := ips[0].Unmap()
	if a.IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("connect: %s is %s, a loopback address: it cannot be reached from the workers' namespaces (each has its own loopback); use an address of one of the host's interfaces", host, a)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// existingHost is a server of an ensemble the tool does not manage: an address and
// nothing else. It starts, kills and signals nothing; Exec reports the host as gone
// (nemesis.ErrHostGone: nothing of the tool's is there to undo); a fault that needs
// more is refused before the run starts (Config.Validate).
type existingHost struct {
	name string
	addr netip.AddrPort
}

var (
	_ nemesis.ServerHost = existingHost{}
	_ nemesis.ClientSide = existingHost{}
)

// errUnmanaged is what existingHost answers to anything but its address.
var errUnmanaged = errors.New("a server of an existing ensemble: not managed by zlockcheck")

func (h existingHost) String() string   { return "existing:" + h.name }
func (h existingHost) Addr() netip.Addr { return h.addr.Addr() }

// Pid is 0: the server's process is not the tool's to know.
func (h existingHost) Pid() int { return 0 }
func (h existingHost) Start(context.Context) error {
	return fmt.Errorf("start %s: %w", h, errUnmanaged)
}
func (h existingHost) Kill(context.Context) error { return nil }
func (h existingHost) TablePrefix() string        { return nemesis.TablePrefix }
func (h existingHost) LogTail(context.Context, int) ([]string, error) {
	return nil, fmt.Errorf("no log: %w", errUnmanaged)
}

func (h existingHost) Signal(context.Context, syscall.Signal) error {
	return fmt.Errorf("%s: %w", h, nemesis.ErrNotRunning)
}

func (h existingHost) Exec(context.Context, []byte, ...string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w (%w)", h, nemesis.ErrHostGone, errUnmanaged)
}

// makeChroot creates the run's chroot (and the parents missing), refusing one that
// exists: the run must own every znode it will delete. It returns the znodes it
// created, outermost first.
func makeChroot(conn *zk.Conn, chroot string) ([]string, error) {
	if ok, _, err := conn.Exists(chroot); err != nil {
		return nil, fmt.Errorf("chroot %s: %w", chroot, err)
	} else if ok {
		return nil, fmt.Errorf("chroot %s already exists on the ensemble: give a fresh one (--chroot), the run deletes it at its end", chroot)
	}
	var made []string
	parts := strings.Split(strings.TrimPrefix(chroot, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		_, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
		switch {
		case err == nil:
			made = append(made, p)
		case errors.Is(err, zk.ErrNodeExists) && p != chroot:
		default:
			return made, fmt.Errorf("chroot: create %s: %w", p, err)
		}
	}
	return made, nil
}

// removeChroot deletes the chroot's subtree, then each parent the run created if it
// is empty (another run may share /zlockcheck). Ephemeral nodes of sessions not yet
// expired may reappear in the count: it retries for a while.
func removeChroot(conn *zk.Conn, chroot string, made []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := deleteTree(conn, chroot)
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("delete chroot %s: %w", chroot, err)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range slices.Backward(made) {
		if p == chroot {
			continue
		}
		if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return nil
}

// deleteTree deletes p and everything under it; a node already gone is fine.
func deleteTree(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := deleteTree(conn, path.Join(p, c)); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// ClientAddr is where the server's clients reach it: a client-server partition of an
// existing ensemble is made on the workers' side (nemesis.ClientSide).
func (h existingHost) ClientAddr() netip.AddrPort { return h.addr }

// PrepareRoot creates root, the znode a --connect run writes under (and its missing
// parents), refusing one that exists: the run must own every znode it will delete.
// undo deletes root's subtree, then each parent it created if empty (another run may
// share them), retrying for up to within while the workers' ephemeral nodes go;
// ctx bounds reaching the ensemble.
func (e *Ensemble) PrepareRoot(ctx context.Context, sessionTimeout time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error) {
	conn, err := e.Client(ctx, sessionTimeout)
	if err != nil {
		return nil, err
	}
	made, err := makeChroot(conn, root)
	conn.Close()
	undo = func(ctx context.Context, within time.Duration) error {
		if len(made) == 0 {
			return nil
		}
		conn, err := e.Client(ctx, sessionTimeout)
		if err != nil {
			return fmt.Errorf("delete chroot %s: %w", root, err)
		}
		defer conn.Close()
		if err := removeChroot(conn, root, made, within); err != nil {
			return err
		}
		made = nil
		return nil
	}
	return undo, err
}
