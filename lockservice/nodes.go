package lockservice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
)

// DefaultNodeDir is where a run on SSH nodes keeps its files on each node:
// DefaultNodeDir/zlc<run>/s<id>.
const DefaultNodeDir = "/var/tmp/zlockcheck"

// ZKSetupApt installs Debian's zookeeper package (and a JRE) on each node first.
const ZKSetupApt = "apt"

// SSHConfig runs the ensemble on real hosts reached over SSH instead of in network
// namespaces of this machine (see docs/remote.md, "Real hosts over SSH"). It is recorded in
// config.json (the key file's path, never the key).
type SSHConfig struct {
	// Nodes are the hosts (names or IPv4 addresses), one server each: server N runs
	// on Nodes[N-1].
	Nodes []string `json:"nodes"`
	// Config says how to log in.
	sshnode.Config
	// ZKSetup, when "apt", installs zookeeper and a JRE with apt-get on each node
	// before the run; empty uses the install already there (Config.ZKHome, or
	// Debian's package).
	ZKSetup string `json:"zk_setup,omitempty"`
	// NodeDir holds the run's directory on each node (default DefaultNodeDir): the
	// run's files are in NodeDir/zlc<run>/s<id>, which cleanup finds by that name.
	NodeDir string `json:"node_dir,omitempty"`
	// KeepNodeDirs leaves the nodes' directories (data, logs) after the run.
	KeepNodeDirs bool `json:"keep_node_dirs,omitempty"`
}

// Validate reports a configuration that cannot work, naming the flag.
func (c SSHConfig) Validate() error {
	if len(c.Nodes) == 0 {
		return errors.New("ssh-nodes: no nodes")
	}
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		if n == "" || strings.ContainsAny(n, " \t/@,") {
			return fmt.Errorf("ssh-nodes: %q is not a host name or address", n)
		}
		if seen[n] {
			return fmt.Errorf("ssh-nodes: %s given twice (one server per node)", n)
		}
		seen[n] = true
	}
	if c.ZKSetup != "" && c.ZKSetup != ZKSetupApt {
		return fmt.Errorf("zk-setup: want %q or nothing, got %q", ZKSetupApt, c.ZKSetup)
	}
	if c.NodeDir != "" && (!path.IsAbs(c.NodeDir) || path.Clean(c.NodeDir) == "/") {
		return fmt.Errorf("node-dir: want an absolute directory other than /, got %q", c.NodeDir)
	}
	return c.Config.Validate()
}

// runDir is the run's directory on every node.
func (c SSHConfig) RunDir(runID string) string {
	base := c.NodeDir
	if base == "" {
		base = DefaultNodeDir
	}
	return path.Join(base, "zlc"+runID)
}

// DialNodes connects to every node at once; the error names each node that failed.
func DialNodes(ctx context.Context, c SSHConfig) ([]*sshnode.Node, error) {
	nodes := make([]*sshnode.Node, len(c.Nodes))
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, host := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = sshnode.Dial(ctx, host, c.Config)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("node %d (%s): %w", i+1, host, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		CloseNodes(nodes)
		return nil, fmt.Errorf("ssh-nodes: cannot reach every node: %w", err)
	}
	return nodes, nil
}

// CloseNodes closes the connections to the nodes.
func CloseNodes(nodes []*sshnode.Node) {
	for _, n := range nodes {
		if n != nil {
			_ = n.Close()
		}
	}
}

// NodeAddr is host's IPv4 address (host may be a name).
func NodeAddr(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("ssh-nodes: %s: no IPv4 address: %v", host, err)
	}
	return addrs[0].Unmap(), nil
}

// CleanupNodes removes from every node what any run on SSH nodes may have left: the
// nftables tables named zlc_..., the servers started from a node directory (a
// ZooKeeper's command line names NodeDir/zlc...; any server's working directory is
// in it), and those directories. It returns what
// it removed, one line each, and goes on past a node it cannot reach.
func CleanupNodes(ctx context.Context, c SSHConfig) ([]string, error) {
	return sweepNodes(ctx, c, true)
}

// sweepNodes removes from every node what runs left there: every run's leftovers
// when all is set, else only those of runs this machine started whose harness is
// dead (their node directory's owner file names this machine and a run id no live
// owner here has: netns.Owned). A run of another machine is never touched then: this
// machine cannot know whether its harness lives.
func sweepNodes(ctx context.Context, c SSHConfig, all bool) ([]string, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	nft := "nft"
	if c.Defaults().User != "root" {
		nft = "sudo -n nft"
	}
	base := path.Dir(c.RunDir("x"))
	nodes := make([]Shell, 0, len(c.Nodes))
	var errs []error
	for _, host := range c.Nodes {
		n, err := sshnode.Dial(ctx, host, c.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", host, err))
			continue
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	// First what is on every node, then whose it is: an owner here is made before
	// anything on the nodes is named after it. Then each node removes the dead
	// runs' (the nodes may share a file system, as the test fixture's do).
	var ids []string
	if !all {
		found := map[string]bool{}
		for _, n := range nodes {
			dead, err := deadRunsOn(ctx, n, base, MachineID())
			errs = append(errs, err)
			for _, id := range dead {
				found[id] = true
			}
		}
		if len(found) == 0 {
			return nil, errors.Join(errs...)
		}
		for id := range found {
			ids = append(ids, id)
		}
		sort.Strings(ids)
	}
	var out []string
	for _, n := range nodes {
		lines, err := sweepNode(ctx, n, base, nft, ids)
		out = append(out, lines...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// deadRunsOn lists the runs with a directory under base on node n that this
// machine (machine) started and whose owner here is dead.
func deadRunsOn(ctx context.Context, n Shell, base, machine string) ([]string, error) {
	text, err := n.Run(ctx, sshnode.Cmd{Script: listOwnersScript(base), Idempotent: true, What: "list run owners"})
	if err != nil {
		return nil, NodeErr(n, n.String(), err)
	}
	return deadNodeRuns(string(text), base, machine), nil
}

// sweepNode removes from node n the leftovers of runs ids (nil: every run's), and
// says what it removed, one line each ("node: what").
func sweepNode(ctx context.Context, n Shell, base, nft string, ids []string) ([]string, error) {
	text, err := n.Run(ctx, sshnode.Cmd{Script: cleanupScript(base, nft, ids), Idempotent: true, What: "cleanup"})
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if l != "" {
			out = append(out, n.String()+": "+l)
		}
	}
	if err != nil {
		return out, NodeErr(n, n.String(), err)
	}
	return out, nil
}

// NodeOwnerFile is the file in a run's node directory that names the machine whose
// harness started the run, and the run: "<machine> <run id>".
const NodeOwnerFile = "owner"

// MachineID names this machine to the nodes: /etc/machine-id, else its host name.
func MachineID() string {
	if b, err := os.ReadFile("/etc/machine-id"); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return "host-" + strings.ReplaceAll(h, " ", "_")
}

// listOwnersScript prints, for each run directory under base with an owner file,
// "<directory> <machine> <run id>".
func listOwnersScript(base string) string {
	return fmt.Sprintf(`for f in %s/zlc*/%s; do [ -f "$f" ] || continue; printf '%%s %%s\n' "${f%%/*}" "$(head -n 1 "$f")"; done; true`,
		sshnode.Quote(base), NodeOwnerFile)
}

// deadNodeRuns picks from listOwnersScript's output the ids of the runs that machine
// started whose owner here is dead.
func deadNodeRuns(text, base, machine string) []string {
	var ids []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != machine || !nodeRunID.MatchString(f[2]) || f[0] != path.Join(base, "zlc"+f[2]) {
			continue
		}
		if !netns.Owned(netns.Prefix + f[2]) {
			ids = append(ids, f[2])
		}
	}
	return ids
}

// nodeRunID is what a run id looks like.
var nodeRunID = regexp.MustCompile(`^[a-z0-9]{1,8}$`)

// cleanupScript is the sweep's script for a node: base is the node directory's
// parent, nft the command that runs nft; ids the runs whose leftovers it removes (nil:
// every run's).
func cleanupScript(base, nft string, ids []string) string {
	table, dir := "zlc_*", "zlc"
	if ids != nil {
		table, dir = "", ""
		for i, id := range ids {
			if i > 0 {
				table += "|"
			}
			table += "zlc_" + id + "_*"
		}
	}
	var b strings.Builder
	b.WriteString(SigGroup)
	fmt.Fprintf(&b, "base=%s\n", sshnode.Quote(base))
	fmt.Fprintf(&b, `%[1]s list tables 2>/dev/null | while read -r kw fam name; do
  case "$name" in %[2]s) %[1]s delete table "$fam" "$name" && echo "nftables table $fam $name";; esac
done
`, nft, table)
	marks := []string{dir}
	if ids != nil {
		marks = marks[:0]
		for _, id := range ids {
			marks = append(marks, "zlc"+id+"/")
		}
	}
	for _, m := range marks {
		fmt.Fprintf(&b, `for p in /proc/[0-9]*; do
  pid=${p#/proc/}; [ "$pid" = "$$" ] && continue
  { grep -qaF QuorumPeerMain $p/cmdline 2>/dev/null && grep -qaF "$base/%[1]s" $p/cmdline 2>/dev/null; } ||
    case "$(readlink $p/cwd 2>/dev/null)/" in "$base/%[1]s"*) true;; *) false;; esac || continue
  sigGroup KILL $pid || kill -s KILL $pid; echo "server process $pid"
done
`, m)
	}
	if ids == nil {
		b.WriteString(`for d in "$base"/zlc*; do [ -e "$d" ] || continue; rm -rf "$d" && echo "directory $d"; done
`)
	} else {
		for _, id := range ids {
			fmt.Fprintf(&b, `d="$base/zlc%s"; [ -e "$d" ] && rm -rf "$d" && echo "directory $d"
`, id)
		}
	}
	b.WriteString("true")
	return b.String()
}

// Shell is what sshHost needs of a node: an sshnode.Node (or, in a unit test, this
// machine's sh).
type Shell interface {
	String() string
	Run(ctx context.Context, cmd sshnode.Cmd) ([]byte, error)
	Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)
	ReadFile(ctx context.Context, file string) ([]byte, error)
	WriteFile(ctx context.Context, file string, data []byte, perm os.FileMode) error
}

// NodeErr wraps err with the node it happened on, once.
func NodeErr(node fmt.Stringer, what string, err error) error {
	if err == nil {
		return nil
	}
	var se *sshnode.Error
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("%s on %s: %w", what, node, err)
}

// SigGroup is a shell function: sigGroup SIG PID signals PID's process group (dash's
// kill builtin takes no negative pid: then /bin/kill does).
const SigGroup = `sigGroup() { kill -s "$1" -- "-$2" 2>/dev/null || env kill -s "$1" -- "-$2"; }` + "\n"
