package netns_test

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// The uplink tests use a test-nodes fixture (a namespace behind a bridge in the host's
// own namespace, its sshd answering on port 22) as the "real address" to reach.

func forwarding(t *testing.T, ifc string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + ifc + "/forwarding")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// hostState is what the uplink may change in the host's namespace: zlc links, zlc
// nft tables, the bridge's forwarding and the global ip_forward.
func hostState(t *testing.T, bridge string) string {
	t.Helper()
	links, _ := exec.Command("ip", "-o", "link").Output()
	var zlc []string
	for _, l := range strings.Split(string(links), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "zlc") {
			zlc = append(zlc, strings.Split(strings.TrimSuffix(f[1], ":"), "@")[0])
		}
	}
	tables, _ := exec.Command("nft", "list", "tables").Output()
	var zt []string
	for _, l := range strings.Split(string(tables), "\n") {
		if strings.Contains(l, "zlc") {
			zt = append(zt, l)
		}
	}
	return "links=" + strings.Join(zlc, ",") + " tables=" + strings.Join(zt, ",") +
		" fwd(" + bridge + ")=" + forwarding(t, bridge) + " ip_forward=" + forwarding(t, "all")
}

// banner reads the first bytes the node's sshd sends, from inside a worker namespace.
func banner(ctx context.Context, h netns.Host, addr netip.Addr) (string, error) {
	out, err := h.Run(ctx, "timeout", "5", "bash", "-c", "exec 3<>/dev/tcp/"+addr.String()+"/22 && head -c 4 <&3")
	return string(out), err
}

func TestUplinkReachesARealAddressAndIsRemoved(t *testing.T) {
	nodes := testnodes.StartT(t, 1)
	ctx := context.Background()
	before := hostState(t, nodes.Bridge())
	n, err := netns.Create(ctx, "tup01")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Destroy()
	w1, err := n.AddHost(ctx, "w1", netip.MustParseAddr("10.77.2.1"))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := banner(ctx, w1, nodes.Addrs[0]); out == "SSH-" {
		t.Fatalf("a worker reached %s before the uplink: %s", nodes.Addrs[0], out)
	}
	if err := n.AddUplink(ctx, nodes.Addrs); err != nil {
		t.Fatal(err)
	}
	// A host added after the uplink gets the route too.
	w2, err := n.AddHost(ctx, "w2", netip.MustParseAddr("10.77.2.2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []netns.Host{w1, w2} {
		if out, err := banner(ctx, h, nodes.Addrs[0]); err != nil || out != "SSH-" {
			t.Errorf("%s cannot reach the node through the uplink: %v: %q", h.Name, err, out)
		}
	}
	conn, err := n.Dial(ctx, netip.AddrPortFrom(nodes.Addrs[0], 22).String(), 5*time.Second)
	if err != nil {
		t.Errorf("the hub cannot dial the node: %v", err)
	} else {
		conn.Close()
	}
	if got := forwarding(t, "all"); got != "0" && strings.Contains(before, "ip_forward=0") {
		t.Errorf("the global ip_forward changed to %s", got)
	}
	if err := n.Destroy(); err != nil {
		t.Fatal(err)
	}
	if after := hostState(t, nodes.Bridge()); after != before {
		t.Errorf("host namespace changed by a run with an uplink:\nbefore %s\nafter  %s", before, after)
	}
}

func TestCleanupUndoesTheUplinkOfACrashedRun(t *testing.T) {
	nodes := testnodes.StartT(t, 1)
	ctx := context.Background()
	before := hostState(t, nodes.Bridge())
	n, err := netns.Create(ctx, "tup02")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddHost(ctx, "w1", netip.MustParseAddr("10.77.2.1")); err != nil {
		n.Destroy()
		t.Fatal(err)
	}
	if err := n.AddUplink(ctx, nodes.Addrs); err != nil {
		n.Destroy()
		t.Fatal(err)
	}
	if forwarding(t, nodes.Bridge()) != "1" {
		t.Error("the uplink did not enable forwarding towards the node")
	}
	// The harness "dies": its owner file, which nobody holds any more, names a
	// process that is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove("/run/zlctup02.owner"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/run/zlctup02.owner", []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := netns.CleanupAll(false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains([]byte(strings.Join(rep.Tables, ",")), []byte("zlc_tup02_uplink")) {
		t.Errorf("cleanup did not report the uplink table: %+v", rep)
	}
	if after := hostState(t, nodes.Bridge()); after != before {
		t.Errorf("cleanup left the host namespace changed:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := os.Stat("/run/zlctup02.uplink"); err == nil {
		t.Error("uplink state file left after cleanup")
	}
	for _, ns := range []string{"zlctup02hub", "zlctup02w1"} {
		if netns.Exists(ns) {
			t.Errorf("namespace %s left after cleanup", ns)
		}
	}
}

func TestUplinkRefusesLoopback(t *testing.T) {
	n := &netns.Network{}
	err := n.AddUplink(context.Background(), []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("AddUplink(127.0.0.1) = %v, want a loopback error", err)
	}
}
