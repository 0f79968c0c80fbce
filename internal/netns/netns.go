package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace and link the tool creates on the host.
const Prefix = "zlc"

// hubAddr is the harness's own address on the run's bridge, inside the hub namespace.
// The whole 10.77.0.0/16 subnet exists only inside the run's namespaces, so it cannot
// clash with or reach anything on the host.
var hubAddr = netip.MustParseAddr("10.77.0.1")

const prefixLen = 16

// Network is one run's private network: a hub namespace holding a bridge (and the
// harness's own address on it), and one namespace per host, each joined to the bridge
// by a veth pair. Nothing is created in the host's own namespace except the namespace
// files themselves, unless the run asks for an uplink (AddUplink).
type Network struct {
	runID string
	hub   string
	// owner is the run's held owner file (owner.go).
	owner *owner
	hosts []Host
	// uplink is set by AddUplink (uplink.go); nil when the run has no way out.
	uplink *uplinkState
}

// Host is one namespace on the network: a server or a worker slot.
type Host struct {
	// Name is the short name within the run, e.g. "s1" or "w3".
	Name string
	// Netns is the namespace name, e.g. "zlc4f2a1cs1".
	Netns string
	// Addr is the host's address on the run's bridge.
	Addr netip.Addr
	// HubLink is the name of the host's veth end inside the hub namespace.
	HubLink string
}

// Create makes the hub namespace and bridge for a run. runID must be short
// (namespace names are Prefix+runID+host name) and unique among live runs.
func Create(ctx context.Context, runID string) (*Network, error) {
	if !validID.MatchString(runID) {
		return nil, fmt.Errorf("create network: bad run id %q (want 1 to 8 of a-z, 0-9)", runID)
	}
	n := &Network{runID: runID, hub: Prefix + runID + "hub"}
	// The owner file tells a later run or cleanup that this run's harness is alive:
	// made before anything named after the run.
	var err error
	if n.owner, err = claimOwner(runID); err != nil {
		return nil, err
	}
	if err := ipCmd(ctx, nil, "netns", "add", n.hub); err != nil {
		n.owner.release()
		return nil, fmt.Errorf("create hub namespace: %w", err)
	}
	script := strings.Join([]string{
		"link set lo up",
		"link add zlcbr0 type bridge",
		"link set zlcbr0 up",
		fmt.Sprintf("addr add %s/%d dev zlcbr0", hubAddr, prefixLen),
	}, "\n")
	if err := ipBatch(ctx, n.hub, script); err != nil {
		_ = ipCmd(context.Background(), nil, "netns", "del", n.hub)
		n.owner.release()
		return nil, fmt.Errorf("create bridge: %w", err)
	}
	return n, nil
}

// HubNetns names the hub namespace, where the harness's own connections start.
func (n *Network) HubNetns() string { return n.hub }

// HubAddr is the harness's address on the bridge.
func (n *Network) HubAddr() netip.Addr { return hubAddr }

// CIDR is the run network's address range (10.77.0.0/16): the hub's and every
// host's address is in it, and nothing outside the run's namespaces is.
func (n *Network) CIDR() netip.Prefix { return runNet }

// Hosts lists the hosts added so far.
func (n *Network) Hosts() []Host { return append([]Host(nil), n.hosts...) }

// AddHost creates a namespace for a host called name with address addr and plugs it
// into the bridge. name must be short (at most 10 characters).
func (n *Network) AddHost(ctx context.Context, name string, addr netip.Addr) (Host, error) {
	h := Host{Name: name, Netns: Prefix + n.runID + name, Addr: addr, HubLink: Prefix + name}
	if len(h.HubLink) > 15 {
		return Host{}, fmt.Errorf("host name %q too long for a link name", name)
	}
	if err := ipCmd(ctx, nil, "netns", "add", h.Netns); err != nil {
		return Host{}, fmt.Errorf("create namespace for %s: %w", name, err)
	}
	n.hosts = append(n.hosts, h)
	hub := fmt.Sprintf("link add %s type veth peer name eth0 netns %s\nlink set %s master zlcbr0 up\n",
		h.HubLink, h.Netns, h.HubLink)
	if err := ipBatch(ctx, n.hub, hub); err != nil {
		return Host{}, fmt.Errorf("link %s to the bridge: %w", name, err)
	}
	inner := fmt.Sprintf("link set lo up\naddr add %s/%d dev eth0\nlink set eth0 up\n", addr, prefixLen)
	if n.uplink != nil {
		inner += fmt.Sprintf("route add default via %s\n", hubAddr)
	}
	if err := ipBatch(ctx, h.Netns, inner); err != nil {
		return Host{}, fmt.Errorf("configure %s: %w", name, err)
	}
	return h, nil
}

// Command returns a command that runs argv inside the host's namespace, in its own
// process group, killed if the harness dies.
func (h Host) Command(argv ...string) *exec.Cmd {
	return commandIn(h.Netns, argv...)
}

// Run runs argv inside the host's namespace and returns its combined output.
func (h Host) Run(ctx context.Context, argv ...string) ([]byte, error) {
	return Exec(ctx, h.Netns, nil, argv...)
}

func commandIn(ns string, argv ...string) *exec.Cmd {
	args := append([]string{"netns", "exec", ns}, argv...)
	cmd := exec.Command("ip", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// RunCmd runs cmd (one of Host.Command's, which leads its own process group) to its
// end, and kills its process group if ctx ends first.
func RunCmd(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
}

// Dial opens a TCP connection from the hub namespace (the harness's address on the
// bridge) to addr, which must be on the run's network.
func (n *Network) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return dialIn(ctx, n.hub, addr, timeout)
}

// Dial opens a TCP connection from the host's namespace (its address) to addr, as a
// process running there would.
func (h Host) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return dialIn(ctx, h.Netns, addr, timeout)
}

// dialIn dials addr from namespace ns.
func dialIn(ctx context.Context, ns, addr string, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(ns, func() error {
		d := net.Dialer{Timeout: timeout}
		var err error
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

// inNetns runs fn on an OS thread switched into the named namespace. Sockets made in
// fn stay in that namespace after the thread switches back.
func inNetns(ns string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter namespace %s: %w", ns, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the wrong namespace: keep it locked so the runtime
		// throws it away when this goroutine ends.
		return errors.Join(fnErr, fmt.Errorf("leave namespace %s: %w", ns, err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Destroy kills every process left in the run's namespaces and deletes them; deleting
// a namespace removes its links, so the bridge and every veth go with them.
func (n *Network) Destroy() error {
	names := []string{n.hub}
	for _, h := range n.hosts {
		names = append(names, h.Netns)
	}
	err := destroy(names)
	if n.uplink != nil {
		err = errors.Join(err, removeUplink(n.runID, n.uplink))
	}
	if err == nil {
		n.uplink = nil
		n.owner.release()
	}
	return err
}

// Report says what a cleanup found and removed.
type Report struct {
	Namespaces []string
	Processes  []int
	// Links and Tables are what was removed from the host's own namespace: links
	// named Prefix..., the uplinks' nft tables (forwarding was restored with them).
	Links  []string
	Tables []string
	// Skipped counts namespaces of runs whose harness is still alive.
	Skipped int
}

// CleanupAll removes every namespace whose name starts with Prefix, after killing the
// processes inside, and what such runs added to the host's own namespace (uplinks,
// test fixtures' links): what a harness that was SIGKILLed left behind. What belongs
// to a live owner (Owned) is left alone unless all is set. It touches nothing else on
// the host.
func CleanupAll(all bool) (Report, error) {
	found, err := List()
	if err != nil {
		return Report{}, err
	}
	// Ownership is asked after each name was found: an owner file is made before
	// anything named after it.
	owned := Owned
	if all {
		owned = func(string) bool { return false }
	}
	var names []string
	for _, n := range found {
		if !owned(n) {
			names = append(names, n)
		}
	}
	rep := Report{Namespaces: names, Skipped: len(found) - len(names)}
	for _, ns := range names {
		rep.Processes = append(rep.Processes, pidsIn(ns)...)
	}
	err = destroy(names)
	var hostErr error
	rep.Links, rep.Tables, hostErr = cleanHost(owned)
	removeDeadOwners()
	return rep, errors.Join(err, hostErr)
}

// List returns the names of all namespaces the tool made that still exist.
func List() ([]string, error) {
	entries, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Pids lists the processes in namespace ns (none when it does not exist).
func Pids(ns string) []int { return pidsIn(ns) }

func pidsIn(ns string) []int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// KillAll kills every process in namespace ns and waits (up to 5 s) for them to go.
func KillAll(ns string) error {
	for _, pid := range pidsIn(ns) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(pidsIn(ns)) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s: processes %v outlived SIGKILL for 5s", ns, pidsIn(ns))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func destroy(names []string) error {
	var errs []error
	// Kill first everywhere (a stopped process dies of SIGKILL too), then wait for the
	// processes to go, then delete.
	for _, ns := range names {
		for _, pid := range pidsIn(ns) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, ns := range names {
		for len(pidsIn(ns)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if err := ipCmd(context.Background(), nil, "netns", "del", ns); err != nil {
			if _, statErr := os.Stat("/run/netns/" + ns); statErr == nil {
				errs = append(errs, fmt.Errorf("delete namespace %s: %w", ns, err))
			}
		}
	}
	return errors.Join(errs...)
}

func ipCmd(ctx context.Context, stdin []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipBatch(ctx context.Context, ns, script string) error {
	return ipCmd(ctx, []byte(script), "-n", ns, "-batch", "-")
}

// ErrGone is what Exec's error wraps when the namespace does not exist (any more).
var ErrGone = errors.New("namespace gone")

// goneError says which namespace does not exist; it is ErrGone.
type goneError struct{ ns string }

func (e goneError) Error() string        { return "namespace " + e.ns + " does not exist" }
func (e goneError) Is(target error) bool { return target == ErrGone }

// Exists reports whether the named namespace exists.
func Exists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

// checkName refuses namespace names the tool did not make.
func checkName(ns string) error {
	if !strings.HasPrefix(ns, Prefix) {
		return fmt.Errorf("refusing to run in namespace %q: not made by zlockcheck", ns)
	}
	if strings.ContainsAny(ns, "/\x00") {
		return fmt.Errorf("bad namespace name %q", ns)
	}
	return nil
}

// Exec runs argv inside the named namespace (which must be one the tool made, i.e.
// start with Prefix), feeding it stdin, and returns its combined output. When the
// namespace does not exist, before or after the command, the error wraps ErrGone.
func Exec(ctx context.Context, ns string, stdin []byte, argv ...string) ([]byte, error) {
	if err := checkName(ns); err != nil {
		return nil, err
	}
	if !Exists(ns) {
		return nil, goneError{ns}
	}
	cmd := commandIn(ns, argv...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := RunCmd(ctx, cmd); err != nil {
		if !Exists(ns) {
			return out.Bytes(), goneError{ns}
		}
		return out.Bytes(), fmt.Errorf("%s in %s: %w: %s", strings.Join(argv, " "), ns, err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}
