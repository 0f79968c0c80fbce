package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Network conventions of a run (see internal/netns and harness).
const (
	// tablePrefix starts the name of every nftables table the nemesis creates.
	tablePrefix = "zlc_"
	// link is the interface of a host namespace facing the run's bridge.
	link = "eth0"
	// clientPort is the ZooKeeper servers' client port.
	clientPort = 2181
	// runSubnet holds every address of a run.
	runSubnet = "10.77.0.0/16"
	// clientSubnet holds the worker slots' addresses.
	clientSubnet = "10.77.2.0/24"
)

// The nftables tables, one per kind of fault, so that faults never clobber each other.
const (
	tablePartition = tablePrefix + "partition" // server netns: drop from peer servers
	tablePacket    = tablePrefix + "packet"    // server netns: random loss on its link
	tableClientCut = tablePrefix + "clientcut" // server netns: drop its clients
	tableIsolate   = tablePrefix + "isolate"   // worker netns: drop all servers
	tableReplyLoss = tablePrefix + "replyloss" // worker netns: drop the servers' replies
	// worker netns: drop the servers' replies but watch notifications
	tableWatchesOnly = tablePrefix + "watchesonly"
)

// checkNetns refuses namespaces the run did not make and ones that do not exist.
func checkNetns(ns string) error {
	if !strings.HasPrefix(ns, netns.Prefix) {
		return fmt.Errorf("refusing to touch namespace %q: its name does not start with %q", ns, netns.Prefix)
	}
	if strings.ContainsAny(ns, "/\x00") || ns == "." || ns == ".." {
		return fmt.Errorf("bad namespace name %q", ns)
	}
	if !netnsExists(ns) {
		return fmt.Errorf("namespace %s does not exist", ns)
	}
	return nil
}

func netnsExists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

// checkAddr refuses addresses outside the run's subnet.
func checkAddr(a netip.Addr) error {
	if !netip.MustParsePrefix(runSubnet).Contains(a) {
		return fmt.Errorf("refusing address %s: not on the run network %s", a, runSubnet)
	}
	return nil
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

// nftReplace atomically replaces table (family inet) in ns with the given chains.
func nftReplace(ctx context.Context, ns, table string, chains ...string) error {
	if err := checkTable(table); err != nil {
		return err
	}
	if err := checkNetns(ns); err != nil {
		return err
	}
	script := fmt.Sprintf("table inet %[1]s {}\ndelete table inet %[1]s\ntable inet %[1]s {\n%[2]s}\n",
		table, strings.Join(chains, ""))
	if _, err := netns.Exec(ctx, ns, []byte(script), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}

// nftDelete removes table (family inet) from ns if it is there. A namespace that no
// longer exists has nothing to remove.
func nftDelete(ctx context.Context, ns, table string) error {
	return nftDeleteFamily(ctx, ns, "inet", table)
}

func nftDeleteFamily(ctx context.Context, ns, family, table string) error {
	if err := checkTable(table); err != nil {
		return err
	}
	if !netnsExists(ns) {
		return nil
	}
	if err := checkNetns(ns); err != nil {
		return err
	}
	// Declaring the table first makes the delete succeed whether or not it existed.
	script := fmt.Sprintf("table %[1]s %[2]s {}\ndelete table %[1]s %[2]s\n", family, table)
	if _, err := netns.Exec(ctx, ns, []byte(script), "nft", "-f", "-"); err != nil {
		if !netnsExists(ns) {
			return nil
		}
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}

// nftDeleteAll removes every zlc_* table from ns (of any family).
func nftDeleteAll(ctx context.Context, ns string) error {
	if !netnsExists(ns) {
		return nil
	}
	if err := checkNetns(ns); err != nil {
		return err
	}
	out, err := netns.Exec(ctx, ns, nil, "nft", "list", "tables")
	if err != nil {
		if !netnsExists(ns) {
			return nil
		}
		return fmt.Errorf("nft: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && strings.HasPrefix(f[2], tablePrefix) {
			errs = append(errs, nftDeleteFamily(ctx, ns, f[1], f[2]))
		}
	}
	return errors.Join(errs...)
}

func checkTable(table string) error {
	if !strings.HasPrefix(table, tablePrefix) || strings.ContainsAny(table, " \t\n{};") {
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

// netemReplace sets a netem root qdisc on the namespace's link.
func netemReplace(ctx context.Context, ns string, args []string) error {
	if err := checkNetns(ns); err != nil {
		return err
	}
	argv := append([]string{"tc", "qdisc", "replace", "dev", link, "root", "netem"}, args...)
	out, err := netns.Exec(ctx, ns, nil, argv...)
	if err != nil {
		if strings.Contains(string(out), "qdisc kind is unknown") {
			return &NetemUnavailableError{Output: string(out)}
		}
		return fmt.Errorf("tc: %w", err)
	}
	return nil
}

// netemDelete removes a netem root qdisc from the namespace's link, if there is one.
func netemDelete(ctx context.Context, ns string) error {
	if !netnsExists(ns) {
		return nil
	}
	if err := checkNetns(ns); err != nil {
		return err
	}
	out, err := netns.Exec(ctx, ns, nil, "tc", "qdisc", "show", "dev", link, "root")
	if err != nil {
		return fmt.Errorf("tc: %w", err)
	}
	if !strings.Contains(string(out), "netem") {
		return nil
	}
	if _, err := netns.Exec(ctx, ns, nil, "tc", "qdisc", "del", "dev", link, "root"); err != nil {
		return fmt.Errorf("tc: %w", err)
	}
	return nil
}
