package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The uplink is the one way out of a run's network, added only when a run must reach
// real addresses (SSH nodes, an existing ensemble): a veth pair from the host's own
// namespace (link zlc<run>up) to the hub namespace (link zlcup), a /30 on it, a
// default route via the hub in every namespace of the run, masquerade twice (in the
// hub for 10.77.0.0/16 going out the uplink, in the host for the /30 going anywhere
// else) and IPv4 forwarding switched on for the interfaces involved only.
//
// In the host's own namespace it adds exactly: the link zlc<run>up, the nft table
// zlc_<run>_uplink, and net.ipv4.conf.<if>.forwarding=1 on the link and on the
// interfaces towards the destinations (their previous values are restored). What it
// must undo is written to /run/zlc<run>.uplink first, so CleanupAll can undo it after
// the harness was SIGKILLed. The global net.ipv4.ip_forward is never touched.

// uplinkPool is where uplink /30s come from: 198.18.0.0/15 is reserved for network
// benchmark tests (RFC 2544, RFC 5735) and never assigned to real networks, so a /30
// from it cannot clash with an address a run wants to reach, nor (being picked among
// the /30s no interface of the host uses) with another run's uplink.
var uplinkPool = netip.MustParsePrefix("198.18.0.0/15")

// hubUplink is the uplink's name inside the hub namespace.
const hubUplink = "zlcup"

// runNet is the whole network of a run, masqueraded when it goes out the uplink.
var runNet = netip.PrefixFrom(hubAddr, prefixLen).Masked()

// uplinkState is what an uplink changed in the host's namespace: persisted as JSON
// next to the run's owner file, read back by Destroy and CleanupAll.
type uplinkState struct {
	// Link is the uplink's end in the host namespace; Table the host's nft table.
	Link  string `json:"link"`
	Table string `json:"table"`
	// Forwarding maps each interface whose net.ipv4.conf.<if>.forwarding the run set
	// to 1 to its value before any run did ("0" or "1").
	Forwarding map[string]string `json:"forwarding"`
}

func uplinkFile(runID string) string {
	return filepath.Join(ownerDir, Prefix+runID+".uplink")
}

func uplinkTable(runID string) string { return "zlc_" + runID + "_uplink" }

// AddUplink lets the run's namespaces (every host, and the hub, so Dial too) reach
// dests, IPv4 addresses outside the run's network, through the host's own routing.
// Hosts added later get the route too. Loopback addresses cannot be reached from a
// namespace: they are an error, as is a destination the host has no route to.
func (n *Network) AddUplink(ctx context.Context, dests []netip.Addr) (err error) {
	if n.uplink != nil {
		return errors.New("uplink: the run already has one")
	}
	for _, d := range dests {
		switch {
		case !d.Unmap().Is4():
			return fmt.Errorf("uplink: %s: only IPv4 destinations can be reached from the run's network", d)
		case d.IsLoopback():
			return fmt.Errorf("uplink: %s is a loopback address: the run's namespaces each have their own loopback, so it cannot be reached from them (use an address of an interface instead)", d)
		case d.IsUnspecified() || d.IsMulticast():
			return fmt.Errorf("uplink: %s is not a host address", d)
		case runNet.Contains(d.Unmap()):
			return fmt.Errorf("uplink: %s is inside the run's own network %s", d, runNet)
		}
	}
	egress, err := egressInterfaces(ctx, dests)
	if err != nil {
		return err
	}
	unlock, err := lockUplinks()
	if err != nil {
		return err
	}
	defer unlock()
	p, err := freeSubnet(ctx, uplinkPool, 30)
	if err != nil {
		return fmt.Errorf("uplink: %w", err)
	}
	st := &uplinkState{Link: Prefix + n.runID + "up", Table: uplinkTable(n.runID), Forwarding: map[string]string{}}
	if len(st.Link) > 15 {
		return fmt.Errorf("uplink: run id %q too long for a link name", n.runID)
	}
	for _, ifc := range egress {
		prev, err := forwardingBefore(ifc, n.runID)
		if err != nil {
			return fmt.Errorf("uplink: %w", err)
		}
		st.Forwarding[ifc] = prev
	}
	// Persist first: whatever happens next, Destroy or CleanupAll can undo it.
	if err := writeUplinkState(n.runID, st); err != nil {
		return err
	}
	n.uplink = st
	defer func() {
		if err != nil {
			err = errors.Join(err, removeUplink(n.runID, st))
			n.uplink = nil
		}
	}()
	host, hub := p.Addr().Next(), p.Addr().Next().Next()
	n.uplinkVia = host
	if err := n.plugUplink(ctx, st.Link, p, host, hub); err != nil {
		return err
	}
	for _, ifc := range append([]string{st.Link}, egress...) {
		if err := writeForwarding(ifc, "1"); err != nil {
			return fmt.Errorf("uplink: %w", err)
		}
	}
	if err := nftApply(ctx, "", hostRules(st, p)); err != nil {
		return fmt.Errorf("uplink: host nft table: %w", err)
	}
	for _, h := range n.hosts {
		if err := ipCmd(ctx, nil, "-n", h.Netns, "route", "replace", "default", "via", hubAddr.String()); err != nil {
			return fmt.Errorf("uplink: route for %s: %w", h.Name, err)
		}
	}
	return nil
}

// plugUplink makes the veth pair and configures the hub's end: address, default route,
// forwarding (the hub is the run's own namespace) and the hub's masquerade.
func (n *Network) plugUplink(ctx context.Context, link string, p netip.Prefix, host, hub netip.Addr) error {
	script := strings.Join([]string{
		fmt.Sprintf("link add %s type veth peer name %s netns %s", link, hubUplink, n.hub),
		fmt.Sprintf("addr add %s/%d dev %s", host, p.Bits(), link),
		fmt.Sprintf("link set %s up", link),
	}, "\n")
	if err := ipCmd(ctx, []byte(script), "-batch", "-"); err != nil {
		return fmt.Errorf("uplink: %w", err)
	}
	script = strings.Join([]string{
		fmt.Sprintf("addr add %s/%d dev %s", hub, p.Bits(), hubUplink),
		fmt.Sprintf("link set %s up", hubUplink),
		fmt.Sprintf("route add default via %s", host),
	}, "\n")
	if err := ipBatch(ctx, n.hub, script); err != nil {
		return fmt.Errorf("uplink: hub end: %w", err)
	}
	if _, err := Exec(ctx, n.hub, nil, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"); err != nil {
		return fmt.Errorf("uplink: hub forwarding: %w", err)
	}
	rules := fmt.Sprintf(`table ip zlc_uplink {
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		oifname %q ip saddr %s masquerade
	}
}
`, hubUplink, runNet)
	if err := nftApply(ctx, n.hub, rules); err != nil {
		return fmt.Errorf("uplink: hub nft table: %w", err)
	}
	return nil
}

// hostRules is the host namespace's table: masquerade what comes from the uplink's
// /30 and leaves by another interface, and accept it (and its replies) in forward, in
// case another table's forward chain would drop it by default.
func hostRules(st *uplinkState, p netip.Prefix) string {
	return fmt.Sprintf(`table ip %s {
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %s oifname != %q masquerade
	}
	chain allow {
		type filter hook forward priority filter; policy accept;
		iifname %q accept
		oifname %q ct state established,related accept
	}
}
`, st.Table, p, st.Link, st.Link, st.Link)
}

// egressInterfaces asks the host's routing for the interface towards each dest.
// A destination that is one of the host's own addresses needs none (the uplink
// delivers to it directly); one routed via lo is refused.
func egressInterfaces(ctx context.Context, dests []netip.Addr) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, d := range dests {
		b, err := exec.CommandContext(ctx, "ip", "-o", "route", "get", d.Unmap().String()).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("uplink: no route from this host to %s: %s", d, strings.TrimSpace(string(b)))
		}
		f := strings.Fields(string(b))
		if len(f) > 0 && f[0] == "local" {
			continue
		}
		dev := ""
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "dev" {
				dev = f[i+1]
			}
		}
		if dev == "" || dev == "lo" {
			return nil, fmt.Errorf("uplink: %s is reached via %q on this host, not via an interface a namespace can use", d, dev)
		}
		if !seen[dev] {
			seen[dev] = true
			out = append(out, dev)
		}
	}
	return out, nil
}

func forwardingPath(ifc string) string {
	return filepath.Join("/proc/sys/net/ipv4/conf", ifc, "forwarding")
}

func writeForwarding(ifc, v string) error {
	if strings.ContainsAny(ifc, "/.") || ifc == "all" || ifc == "default" {
		return fmt.Errorf("refusing to set forwarding on %q", ifc)
	}
	if err := os.WriteFile(forwardingPath(ifc), []byte(v+"\n"), 0o644); err != nil {
		return fmt.Errorf("set net.ipv4.conf.%s.forwarding=%s: %w", ifc, v, err)
	}
	return nil
}

// forwardingBefore is ifc's forwarding value before any run's uplink changed it: the
// value another uplink recorded, if one did, else the current one.
func forwardingBefore(ifc, runID string) (string, error) {
	for id, st := range uplinkStates() {
		if v, ok := st.Forwarding[ifc]; ok && id != runID {
			return v, nil
		}
	}
	b, err := os.ReadFile(forwardingPath(ifc))
	if err != nil {
		return "", fmt.Errorf("read net.ipv4.conf.%s.forwarding: %w", ifc, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// uplinkStates reads every persisted uplink, by run id (unreadable files are skipped).
func uplinkStates() map[string]*uplinkState {
	files, _ := filepath.Glob(filepath.Join(ownerDir, Prefix+"*.uplink"))
	states := map[string]*uplinkState{}
	for _, f := range files {
		var st uplinkState
		data, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(data, &st) != nil {
			continue
		}
		states[strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), Prefix), ".uplink")] = &st
	}
	return states
}

func writeUplinkState(runID string, st *uplinkState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(uplinkFile(runID), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("uplink: record state: %w", err)
	}
	return nil
}

// removeUplink undoes st in the host's namespace: the nft table, the link, and each
// interface's forwarding unless another run's uplink still needs it. Each step
// tolerates what is already gone; the state file goes last, once all went well.
func removeUplink(runID string, st *uplinkState) error {
	ctx := context.Background()
	var errs []error
	if tableExists(ctx, st.Table) {
		if err := nftApply(ctx, "", "delete table ip "+st.Table+"\n"); err != nil {
			errs = append(errs, err)
		}
	}
	if linkExists(st.Link) {
		if err := ipCmd(ctx, nil, "link", "del", st.Link); err != nil && linkExists(st.Link) {
			errs = append(errs, err)
		}
	}
	others := uplinkStates()
	delete(others, runID)
	for ifc, prev := range st.Forwarding {
		shared := false
		for _, o := range others {
			_, in := o.Forwarding[ifc]
			shared = shared || in
		}
		if shared || !linkExists(ifc) {
			continue
		}
		if err := writeForwarding(ifc, prev); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		os.Remove(uplinkFile(runID))
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func tableExists(ctx context.Context, table string) bool {
	return exec.CommandContext(ctx, "nft", "list", "table", "ip", table).Run() == nil
}

// nftApply loads an nft script in namespace ns ("" is the host's own).
func nftApply(ctx context.Context, ns, script string) error {
	if ns != "" {
		_, err := Exec(ctx, ns, []byte(script), "nft", "-f", "-")
		return err
	}
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
