package lockservice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// An existing deployment (run --connect) is one the tool does not manage: it starts,
// stops, signals and reconfigures none of its servers. The workers and the harness
// reach them through the run network's uplink (netns.AddUplink). Each kind that can
// be reached so parses its addresses (ParseHostPorts), resolves them once
// (ResolveHostPort) and makes each server an ExistingHost.

// loopbackRefusal says why a loopback address cannot be a --connect address.
const loopbackRefusal = "a loopback address cannot be reached from the workers' namespaces (each has its own loopback); use an address of one of the host's interfaces"

// ParseHostPorts splits a connect string (host:port,host:port; a missing port is
// defaultPort) into host and port pairs, without resolving names; a loopback address
// is refused.
func ParseHostPorts(s string, defaultPort int) ([]string, error) {
	var out []string
	for _, hp := range strings.Split(s, ",") {
		hp = strings.TrimSpace(hp)
		if hp == "" {
			return nil, fmt.Errorf("connect: empty address in %q", s)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			host, port = hp, strconv.Itoa(defaultPort)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("connect: %q: bad port", hp)
		}
		if a, err := netip.ParseAddr(host); host == "localhost" || err == nil && a.IsLoopback() {
			return nil, fmt.Errorf("connect: %q: %s", hp, loopbackRefusal)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// ResolveHostPort turns host:port into an IPv4 address and port, once.
func ResolveHostPort(ctx context.Context, hostport string) (netip.AddrPort, error) {
	host, port, _ := net.SplitHostPort(hostport)
	p, _ := strconv.Atoi(port)
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("connect: resolve %s: %v", host, err)
	}
	a := ips[0].Unmap()
	if a.IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("connect: %s is %s: %s", host, a, loopbackRefusal)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// ExistingHost is a server of a deployment the tool does not manage: an address and
// nothing else. It starts, kills and signals nothing; Exec reports the host as gone
// (nemesis.ErrHostGone: nothing of the tool's is there to undo); a fault that needs
// more is refused before the run starts (harness.Config.Validate).
type ExistingHost struct {
	name string
	addr netip.AddrPort
}

// NewExistingHost is the server named name (as the user wrote it) at addr.
func NewExistingHost(name string, addr netip.AddrPort) ExistingHost {
	return ExistingHost{name: name, addr: addr}
}

var (
	_ nemesis.ServerHost = ExistingHost{}
	_ nemesis.ClientSide = ExistingHost{}
)

// errUnmanaged is what ExistingHost answers to anything but its address.
var errUnmanaged = errors.New("a server of an existing deployment: not managed by zlockcheck")

func (h ExistingHost) String() string   { return "existing:" + h.name }
func (h ExistingHost) Addr() netip.Addr { return h.addr.Addr() }

// ClientAddr is where the server's clients reach it: a client-server partition of an
// existing deployment is made on the workers' side (nemesis.ClientSide).
func (h ExistingHost) ClientAddr() netip.AddrPort { return h.addr }

// Pid is 0: the server's process is not the tool's to know.
func (h ExistingHost) Pid() int { return 0 }
func (h ExistingHost) Start(context.Context) error {
	return fmt.Errorf("start %s: %w", h, errUnmanaged)
}
func (h ExistingHost) Kill(context.Context) error { return nil }
func (h ExistingHost) TablePrefix() string        { return nemesis.TablePrefix }
func (h ExistingHost) LogTail(context.Context, int) ([]string, error) {
	return nil, fmt.Errorf("no log: %w", errUnmanaged)
}

func (h ExistingHost) Signal(context.Context, syscall.Signal) error {
	return fmt.Errorf("%s: %w", h, nemesis.ErrNotRunning)
}

func (h ExistingHost) Exec(context.Context, []byte, ...string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w (%w)", h, nemesis.ErrHostGone, errUnmanaged)
}

// ReachExisting resolves each of an existing deployment's addresses once, makes it a
// Member (numbered from 1) on an ExistingHost, and adds the uplink through which the
// run's network reaches them all.
func ReachExisting(ctx context.Context, net *netns.Network, hostports []string) ([]Member, error) {
	var members []Member
	var addrs []netip.Addr
	for i, hp := range hostports {
		ap, err := ResolveHostPort(ctx, hp)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, ap.Addr())
		members = append(members, Member{ID: i + 1, Port: int(ap.Port()), Host: NewExistingHost(hp, ap)})
	}
	if err := net.AddUplink(ctx, addrs); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return members, nil
}
