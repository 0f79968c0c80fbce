package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Network conventions of a run (see internal/netns and harness).
const (
	// TablePrefix starts the name of every nftables table the nemesis creates: it is
	// the ServerHost.TablePrefix of a namespace of the run's own, and starts every
	// host's.
	TablePrefix = "zlc_"
	// link is the interface of a host namespace facing the run's bridge (a host that
	// implements HostNetwork says its own).
	link = "eth0"
	// clientPort is the ZooKeeper servers' client port.
	clientPort = 2181
	// runSubnet holds every address of a run.
	runSubnet = "10.77.0.0/16"
	// clientSubnet holds the worker slots' addresses (a host that implements
	// HostNetwork says where the workers' traffic comes from).
	clientSubnet = "10.77.2.0/24"
)

// The nftables tables, one per kind of fault, so that faults never clobber each other;
// each host names them with its TablePrefix (zlc_partition, zlc_packet, ...).
const (
	tablePartition = "partition" // server: drop from peer servers
	tablePacket    = "packet"    // server: random loss on its link
	tableClientCut = "clientcut" // server: drop its clients
	// worker netns: drop one unmanaged server (client-server-partition, ClientSide)
	tableServerCut = "servercut"
	tableIsolate   = "isolate"   // worker netns: drop all servers
	tableReplyLoss = "replyloss" // worker netns: drop the servers' replies
	// worker netns: drop the servers' replies but watch notifications
	tableWatchesOnly = "watchesonly"
)

// workerNet is a worker slot's network namespace, where client faults add their
// tables.
type workerNet string

var _ netHost = workerNet("")

func (ns workerNet) String() string      { return string(ns) }
func (ns workerNet) TablePrefix() string { return TablePrefix }

// Exec runs argv in the namespace; one that does not exist gives ErrHostGone.
func (ns workerNet) Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	return netns.Exec(ctx, string(ns), stdin, argv...)
}

// checkAddr refuses addresses that cannot be a server's or a worker's: the run's own
// are on runSubnet, but the servers of an existing ensemble (harness Config.Connect)
// have real addresses, which the workers' namespaces reach through the run's uplink;
// rules naming them go only into tables of the nemesis's own.
func checkAddr(a netip.Addr) error {
	if netip.MustParsePrefix(runSubnet).Contains(a) {
		return nil
	}
	if !a.Is4() || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() {
		return fmt.Errorf("refusing address %s: neither on the run network %s nor a unicast IPv4 address", a, runSubnet)
	}
	return nil
}

// hostLink is h's interface towards its peers and clients.
func hostLink(ctx context.Context, h netHost) (string, error) {
	hn, ok := h.(HostNetwork)
	if !ok {
		return link, nil
	}
	l, err := hn.Link(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: link: %w", h, err)
	}
	if l == "" || strings.ContainsAny(l, " \t\n\"{};") {
		return "", fmt.Errorf("%s: refusing link %q", h, l)
	}
	return l, nil
}

// hostClients is where the workers' traffic comes from as h sees it.
func hostClients(h netHost) string {
	if hn, ok := h.(HostNetwork); ok {
		return hn.Clients().String()
	}
	return clientSubnet
}

func addrSet(addrs []netip.Addr) (string, error) {
	if len(addrs) == 0 {
		return "", fmt.Errorf("empty address set")
	}
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		if err := checkAddr(a); err != nil {
			return "", err
		}
		parts[i] = a.String()
	}
	return "{ " + strings.Join(parts, ", ") + " }", nil
}

// chain is an nftables base chain of a nemesis table: input or output, accepting by
// default, running before the usual filter priority.
func chain(hook string, rules ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority filter - 10; policy accept;\n", hook, hook)
	for _, r := range rules {
		b.WriteString("\t\t" + r + "\n")
	}
	b.WriteString("\t}\n")
	return b.String()
}

// nftReplace atomically replaces h's table of the given kind (family inet) with the
// given chains.
func nftReplace(ctx context.Context, h netHost, kind string, chains ...string) error {
	table := h.TablePrefix() + kind
	if err := checkTable(table); err != nil {
		return err
	}
	script := fmt.Sprintf("table inet %[1]s {}\ndelete table inet %[1]s\ntable inet %[1]s {\n%[2]s}\n",
		table, strings.Join(chains, ""))
	if _, err := h.Exec(ctx, []byte(script), "nft", "-f", "-"); err != nil {
		if errors.Is(err, ErrHostGone) {
			return err
		}
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}

// nftDelete removes h's table of the given kind (family inet) if it is there. A host
// that no longer exists has nothing to remove.
func nftDelete(ctx context.Context, h netHost, kind string) error {
	return nftDeleteTable(ctx, h, "inet", h.TablePrefix()+kind)
}

func nftDeleteTable(ctx context.Context, h netHost, family, table string) error {
	if err := checkTable(table); err != nil {
		return err
	}
	// Declaring the table first makes the delete succeed whether or not it existed.
	script := fmt.Sprintf("table %[1]s %[2]s {}\ndelete table %[1]s %[2]s\n", family, table)
	if _, err := h.Exec(ctx, []byte(script), "nft", "-f", "-"); err != nil {
		if errors.Is(err, ErrHostGone) {
			return nil
		}
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}

// nftDeleteAll removes every table of h whose name starts with its TablePrefix but a
// client-vanish table, whose dead connections stay black-holed (ClientVanish) (of any
// family).
func nftDeleteAll(ctx context.Context, h netHost) error {
	out, err := h.Exec(ctx, nil, "nft", "list", "tables")
	if err != nil {
		if errors.Is(err, ErrHostGone) {
			return nil
		}
		return fmt.Errorf("nft: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && strings.HasPrefix(f[2], h.TablePrefix()) && !strings.HasPrefix(f[2], h.TablePrefix()+tableVanish) {
			errs = append(errs, nftDeleteTable(ctx, h, f[1], f[2]))
		}
	}
	return errors.Join(errs...)
}

func checkTable(table string) error {
	if !strings.HasPrefix(table, TablePrefix) || strings.ContainsAny(table, " \t\n{};") {
		return fmt.Errorf("refusing nftables table %q: not a nemesis table", table)
	}
	return nil
}

// signalGroup sends sig to the process group led by pid. It refuses pids that cannot
// be a worker's or server's group leader, above all this process's own group.
func signalGroup(pid int, sig syscall.Signal) error {
	if pid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pid)
	}
	if pid == os.Getpid() || pid == syscall.Getpgrp() {
		return fmt.Errorf("refusing to signal the nemesis's own process group %d", pid)
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("signal %s to process group %d: %w", sig, pid, err)
	}
	return nil
}

// signalHosts sends sig to the servers on hosts.
func signalHosts(hosts []ServerHost, sig syscall.Signal) func(context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, h := range hosts {
			errs = append(errs, h.Signal(ctx, sig))
		}
		return errors.Join(errs...)
	}
}

// resumeHosts sends SIGCONT to the servers on hosts; a server no longer running is
// resumed.
func resumeHosts(hosts []ServerHost) func(context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, h := range hosts {
			errs = append(errs, resumeHost(ctx, h))
		}
		return errors.Join(errs...)
	}
}

func resumeHost(ctx context.Context, h ServerHost) error {
	if err := h.Signal(ctx, syscall.SIGCONT); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return nil
}

// resumeGroup sends SIGCONT to the group led by pid; a group that is gone is resumed.
func resumeGroup(pid int) error {
	err := signalGroup(pid, syscall.SIGCONT)
	if err != nil && (errors.Is(err, syscall.ESRCH) || pid <= 1) {
		return nil
	}
	return err
}

// NetemUnavailableError says the kernel cannot delay packets: tc's netem queueing
// discipline (sch_netem) is not built or loadable.
type NetemUnavailableError struct {
	// Output is what tc said.
	Output string
}

func (e *NetemUnavailableError) Error() string {
	return "packet delay and jitter need tc's netem qdisc, which this kernel lacks (tc: " +
		strings.TrimSpace(e.Output) + "); use packet loss, which is done with nftables"
}

// netemReplace sets a netem root qdisc on the host's link.
func netemReplace(ctx context.Context, h netHost, args []string) error {
	link, err := hostLink(ctx, h)
	if err != nil {
		return err
	}
	argv := append([]string{"tc", "qdisc", "replace", "dev", link, "root", "netem"}, args...)
	out, err := h.Exec(ctx, nil, argv...)
	if err != nil {
		if errors.Is(err, ErrHostGone) {
			return err
		}
		if strings.Contains(string(out), "qdisc kind is unknown") {
			return &NetemUnavailableError{Output: string(out)}
		}
		return fmt.Errorf("tc: %w", err)
	}
	return nil
}

// netemDelete removes a netem root qdisc from the host's link, if there is one.
func netemDelete(ctx context.Context, h netHost) error {
	link, err := hostLink(ctx, h)
	if err != nil {
		return err
	}
	out, err := h.Exec(ctx, nil, "tc", "qdisc", "show", "dev", link, "root")
	if errors.Is(err, ErrHostGone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tc: %w", err)
	}
	if !strings.Contains(string(out), "netem") {
		return nil
	}
	if _, err := h.Exec(ctx, nil, "tc", "qdisc", "del", "dev", link, "root"); err != nil && !errors.Is(err, ErrHostGone) {
		return fmt.Errorf("tc: %w", err)
	}
	return nil
}
