package harness

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
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// A run against an existing ensemble (Config.Connect, `run --connect`) tests servers
// the tool does not manage: it starts, stops, signals and reconfigures none of them.
// The workers and the harness reach them through the run network's uplink
// (netns.AddUplink); the run writes only under its chroot (Config.Chroot), which must
// not exist before the run and is deleted at its end.

// DefaultChrootParent is where a --connect run's chroot goes when none is given:
// DefaultChrootParent/<run id>.
const DefaultChrootParent = "/zlockcheck"

// connectPort is the port of a --connect address that names none.
const connectPort = 2181

// parseConnect splits a connect string (host:port,host:port; a missing port is
// 2181) into host and port pairs, without resolving names.
func parseConnect(s string) ([]string, error) {
	var out []string
	for _, hp := range strings.Split(s, ",") {
		hp = strings.TrimSpace(hp)
		if hp == "" {
			return nil, fmt.Errorf("connect: empty address in %q", s)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			host, port = hp, strconv.Itoa(connectPort)
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

// validateConnect checks the --connect fields: the addresses, the chroot, and that no
// fault needs a server the tool manages.
func (c Config) validateConnect() error {
	if c.Connect == "" {
		if c.Chroot != "" {
			return errors.New("chroot: only for a run against an existing ensemble (connect)")
		}
		return nil
	}
	addrs, err := parseConnect(c.Connect)
	if err != nil {
		return err
	}
	if err := checkChroot(c.Chroot); err != nil {
		return err
	}
	for _, cl := range c.Nemesis {
		if cl.ServerFault() && cl != nemesis.ClassClientServerPartition {
			return fmt.Errorf("nemesis: %s acts on the servers, and a run against an existing ensemble (connect) does not manage them; its faults are the client ones: %s",
				cl, strings.Join(clientClasses(), ", "))
		}
	}
	// The nemesis aims session-expire and reply-loss at port 2181.
	for _, cl := range c.Nemesis {
		if cl != nemesis.ClassSessionExpire && cl != nemesis.ClassReplyLoss {
			continue
		}
		for _, a := range addrs {
			if _, port, _ := net.SplitHostPort(a); port != strconv.Itoa(connectPort) {
				return fmt.Errorf("nemesis: %s needs the servers' client port to be %d, connect names %s", cl, connectPort, a)
			}
		}
	}
	return nil
}

func clientClasses() []string {
	var out []string
	for _, cl := range nemesis.Classes() {
		if !cl.ServerFault() || cl == nemesis.ClassClientServerPartition {
			out = append(out, string(cl))
		}
	}
	return out
}

// checkChroot accepts "" (the default is set per run) or a clean absolute znode path
// other than / and ZooKeeper's own /zookeeper.
func checkChroot(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
		return fmt.Errorf("chroot: want a clean absolute znode path such as /zlockcheck/test, got %q", p)
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return fmt.Errorf("chroot: %q is ZooKeeper's own subtree", p)
	}
	return nil
}

// named fills the run-specific defaults once the run has its id: the chroot.
func (c Config) named() Config {
	if c.Connect != "" && c.Chroot == "" {
		c.Chroot = path.Join(DefaultChrootParent, c.RunID)
	}
	return c
}

// lockPath is the znode under which the workers take the lock: /zlc/<run>/<key> on
// the run's own ensemble, <chroot>/<key> on an existing one.
func (c Config) lockPath() string {
	if c.Connect != "" {
		return path.Join(c.Chroot, c.Workload.Key)
	}
	return fmt.Sprintf("/zlc/%s/%s", c.RunID, c.Workload.Key)
}

// connectEnsemble is the site's ensemble when it is an existing one: the connect
// addresses resolved once, reached through an uplink added to net, each a Server
// whose host the tool does not manage. It waits until every server listed serves.
func connectEnsemble(ctx context.Context, net *netns.Network, connect string, timeout time.Duration) (*Ensemble, error) {
	hostports, err := parseConnect(connect)
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
		e.Servers = append(e.Servers, &Server{ID: i + 1, Port: int(ap.Port()), Host: existingHost{name: hp, addr: ap}})
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

// makeChroot creates a --connect run's chroot (a no-op on the run's own ensemble) and
// notes in the outcome that the ensemble was an existing one.
func (r *runner) makeChroot(ctx context.Context) error {
	if !r.ens.external {
		return nil
	}
	r.out.ZooKeeperVersion += " (existing ensemble, not managed by zlockcheck)"
	conn, err := r.ens.Client(ctx, r.cfg.SessionTimeout)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	r.chrootMade, err = makeChroot(conn, r.cfg.Chroot)
	r.logf("chroot %s: the run writes only under it and deletes it at its end", r.cfg.Chroot)
	return err
}

// removeChroot deletes what makeChroot made, on every exit path of a --connect run.
func (r *runner) removeChroot() error {
	if len(r.chrootMade) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RecoverBound())
	defer cancel()
	conn, err := r.ens.Client(ctx, r.cfg.SessionTimeout)
	if err != nil {
		return fmt.Errorf("delete chroot %s: %w", r.cfg.Chroot, err)
	}
	defer conn.Close()
	// The workers' sessions may outlive them by a session timeout: their ephemeral
	// nodes go with them, or are deleted here.
	if err := removeChroot(conn, r.cfg.Chroot, r.chrootMade, 2*r.cfg.SessionTimeout); err != nil {
		return err
	}
	r.chrootMade = nil
	return nil
}

// ClientAddr is where the server's clients reach it: a client-server partition of an
// existing ensemble is made on the workers' side (nemesis.ClientSide).
func (h existingHost) ClientAddr() netip.AddrPort { return h.addr }
