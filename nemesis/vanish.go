package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	_ Fault = (*ClientVanish)(nil)
	_ fault = (*ClientVanish)(nil)
)

// SessionKeeper is a lock service whose servers keep a vanished client's session, and its
// locks, until their TCP keepalive gives up on it (the databases). ClientVanish
// records what bounds that, for the cause classes.
type SessionKeeper interface {
	// VanishedClientKept names the settings that bound how long a server keeps the
	// session of a client that vanished, with their values ("": the run's servers
	// keep no session for a client: a ZooKeeper session or a Redis key expires).
	VanishedClientKept() string
}

// tableVanish begins the name of client-vanish's tables in a worker's namespace (one a
// vanish, _<port> after it): each black-holes a dead worker's connections for the
// rest of the run.
const tableVanish = "vanish"

// vanishReap bounds the wait for a killed worker's process to be gone before its
// sockets are destroyed.
const vanishReap = 2 * time.Second

// ClientVanish makes a worker's host vanish without a word, as a power cut, a kernel
// panic or a cable pulled for good would: no FIN, no RST ever reaches a server. It
// lists the worker's TCP connections to the servers (ss in the worker's namespace),
// black-holes them both ways (table zlc_vanish drops their packets by local port),
// SIGKILLs the worker's process group (the kernel's FIN is dropped), then destroys
// the sockets it left (ss -K: their resets are dropped too). The servers learn
// nothing: a ZooKeeper session expires after its timeout and a Redis key after its
// TTL, but a database session, and every lock it holds, lives on until the server's
// TCP keepalive gives up on the connection (with Linux's defaults, 2 h 11 min; see
// lockservice's KeepAlive settings). The harness replaces the worker with a new
// process, whose new connections pass. The fault is over when applied, and a vanished
// host stays gone: nothing undoes it. The table stays (HealAll leaves it too) until the
// run removes the worker's namespace: were it deleted sooner, a server's retransmission
// or keepalive probe would reach the worker's kernel, whose reset would end the
// session as a host that is gone never does. It matches the dead connections' local
// ports only: a new connection that drew one of them again would be cut off too (the
// kernel draws from some 28,000). On a SessionKeeper the fault's value says what
// bounds the session's life ("kept_until").
type ClientVanish struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply makes the target worker's host vanish.
func (f ClientVanish) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ClientVanish) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	cl, picked, err := pickClient(ctx, c, f.Target, f.HolderWait, rng)
	v := clientValue(string(ClassClientVanish), f.Target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	if cl.Pid <= 1 || cl.Netns == "" {
		return plan{value: v}, fmt.Errorf("client-vanish: worker %d has no process id or namespace", cl.Process)
	}
	if k, ok := abilityOf[SessionKeeper](c); ok && k.VanishedClientKept() != "" {
		v["kept_until"] = k.VanishedClientKept() // the cause classes read it
	}
	ns := workerNet(cl.Netns)
	servers := serverAddrs(c)
	apply := func(ctx context.Context) error {
		ports, err := serverConnPorts(ctx, ns, servers)
		if err != nil {
			return fmt.Errorf("client-vanish: %w", err)
		}
		v["ports"] = ports
		if len(ports) > 0 {
			// A table of its own, named by its first port: an earlier vanish's in this
			// namespace must stay.
			if err := nftReplace(ctx, ns, tableVanish+"_"+strconv.Itoa(ports[0]), vanishChains(ports)...); err != nil {
				return err
			}
		}
		if err := killWorker(c, cl); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		waitGone(ctx, cl.Pid, vanishReap)
		if len(ports) == 0 {
			return nil
		}
		if _, err := ns.Exec(ctx, nil, destroyArgv(ports)...); err != nil {
			return fmt.Errorf("client-vanish: destroying the dead worker's sockets: %w", err)
		}
		return nil
	}
	return plan{value: v, nets: []netHost{ns}, apply: apply, undo: noUndo}, nil
}

// vanishChains drop every packet of the given local TCP ports, both ways.
func vanishChains(ports []int) []string {
	set := localPortSet(ports)
	return []string{chain("input", "tcp dport "+set+" drop"), chain("output", "tcp sport "+set+" drop")}
}

// localPortSet is an nftables anonymous set of local ports.
func localPortSet(ports []int) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = strconv.Itoa(p)
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// destroyArgv is the ss command that destroys every TCP socket on the given local
// ports (SOCK_DESTROY; the kernel's reset goes out into the vanish table).
func destroyArgv(ports []int) []string {
	terms := make([]string, len(ports))
	for i, p := range ports {
		terms[i] = "sport = :" + strconv.Itoa(p)
	}
	return []string{"ss", "-K", "-tn", "state", "all", "( " + strings.Join(terms, " or ") + " )"}
}

// serverConnPorts lists the local ports of the TCP connections in h that go to one
// of servers, sorted.
func serverConnPorts(ctx context.Context, h netHost, servers []netip.Addr) ([]int, error) {
	out, err := h.Exec(ctx, nil, "ss", "-Htn", "state", "all")
	if err != nil {
		return nil, fmt.Errorf("ss in %s: %w", h, err)
	}
	return parseConnPorts(string(out), servers), nil
}

// parseConnPorts reads ss -Htn output (state, recv-q, send-q, local, peer) and
// returns the local ports of the connections whose peer is one of servers.
func parseConnPorts(out string, servers []netip.Addr) []int {
	var ports []int
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		local, err1 := netip.ParseAddrPort(f[3])
		peer, err2 := netip.ParseAddrPort(f[4])
		if err1 != nil || err2 != nil || !slices.Contains(servers, peer.Addr().Unmap()) {
			continue
		}
		if p := int(local.Port()); !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	return ports
}

// waitGone waits up to d for process pid to be gone (reaped, or a zombie no longer
// holding its sockets is good enough: the kernel closed them at exit).
func waitGone(ctx context.Context, pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || processExited(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processExited reports whether pid is a zombie: it has exited, and its sockets were
// closed, but nobody has reaped it yet.
func processExited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command's closing parenthesis: "pid (comm) S ...".
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}
