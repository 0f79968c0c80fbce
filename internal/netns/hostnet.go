package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
)

// What the tool adds to the host's own namespace (the uplink, a test fixture's bridge)
// is named Prefix+id+..., owned like a run's namespaces by an owner file, and found
// again by CleanupAll.

// lockFile serialises picking a free subnet and claiming it, machine-wide.
const lockFile = "/run/zlc-subnets.lock"

// lockSubnets takes the machine-wide subnet lock; the returned func releases it.
func lockSubnets() (func(), error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", lockFile, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", lockFile, err)
	}
	return func() { f.Close() }, nil
}

// freeSubnet returns the first /bits subnet of pool that overlaps no address or route
// of the host's own namespace. Call it holding lockSubnets until the subnet is in use.
func freeSubnet(ctx context.Context, pool netip.Prefix, bits int) (netip.Prefix, error) {
	used, err := hostPrefixes(ctx)
	if err != nil {
		return netip.Prefix{}, err
	}
	size := uint32(1) << (32 - bits)
	base := pool.Masked().Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	count := uint32(1) << (bits - pool.Bits())
	for i := range count {
		v := start + i*size
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits)
		free := true
		for _, u := range used {
			free = free && !u.Overlaps(p)
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /%d left in %s", bits, pool)
}

// hostPrefixes lists the IPv4 addresses (as prefixes) and non-default routes of the
// host's namespace.
func hostPrefixes(ctx context.Context) ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := exec.CommandContext(ctx, "ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip addr: %w", err)
	}
	for _, line := range strings.Split(string(addrs), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				if p, err := netip.ParsePrefix(f[i+1]); err == nil {
					out = append(out, p.Masked())
				}
			}
		}
	}
	routes, err := exec.CommandContext(ctx, "ip", "-o", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route: %w", err)
	}
	for _, line := range strings.Split(string(routes), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "local" || dst == "broadcast" || dst == "unicast" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// Subnet is a subnet of the host's namespace claimed for id: Claim picked it among the
// free ones of a pool and wrote the owner file zlc<id>.owner, so CleanupAll spares
// what is named zlc<id>... while this process lives and removes it after.
type Subnet struct {
	ID     string
	Prefix netip.Prefix
	unlock func()
	owner  *owner
}

// Claim picks a free /bits of pool for id, writes id's owner file, and holds the
// machine-wide lock until Claimed is called (once the caller's address is on a link).
// It is for test fixtures that put links in the host's namespace (internal/testnodes).
func Claim(ctx context.Context, id string, pool netip.Prefix, bits int) (*Subnet, error) {
	if !validID.MatchString(id) {
		return nil, fmt.Errorf("claim: bad id %q", id)
	}
	unlock, err := lockSubnets()
	if err != nil {
		return nil, err
	}
	p, err := freeSubnet(ctx, pool, bits)
	if err != nil {
		unlock()
		return nil, err
	}
	o, err := claimOwner(id)
	if err != nil {
		unlock()
		return nil, err
	}
	return &Subnet{ID: id, Prefix: p, unlock: unlock, owner: o}, nil
}

// Claimed releases the lock Claim took: the subnet is now visibly in use.
func (s *Subnet) Claimed() {
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
}

// Release removes the owner file (after the caller removed its links and namespaces).
func (s *Subnet) Release() {
	s.Claimed()
	s.owner.release()
}

var validID = regexp.MustCompile(`^[a-z0-9]{1,8}$`)

// hostLinks lists the links of the host's namespace named with Prefix.
func hostLinks() []string {
	entries, _ := os.ReadDir("/sys/class/net")
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// uplinkTableRe matches the host tables AddUplink makes; the group is the run id.
var uplinkTableRe = regexp.MustCompile(`^zlc_([a-z0-9]+)_uplink$`)

// hostUplinkTables lists the run ids of the uplink tables in the host's namespace.
func hostUplinkTables() []string {
	out, err := exec.Command("nft", "list", "tables", "ip").Output()
	if err != nil {
		return nil
	}
	var ids []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && f[1] == "ip" {
			if m := uplinkTableRe.FindStringSubmatch(f[2]); m != nil {
				ids = append(ids, m[1])
			}
		}
	}
	return ids
}

// cleanHost removes what dead runs and fixtures left in the host's namespace: their
// uplinks (restoring forwarding), uplink tables and zlc links. owned says whether a
// name belongs to a live run.
func cleanHost(owned func(name string) bool) (links, tables []string, err error) {
	var errs []error
	for id, st := range uplinkStates() {
		if owned(Prefix + id) {
			continue
		}
		if tableExists(context.Background(), st.Table) {
			tables = append(tables, st.Table)
		}
		if linkExists(st.Link) {
			links = append(links, st.Link)
		}
		errs = append(errs, removeUplink(id, st))
	}
	for _, id := range hostUplinkTables() {
		if owned(Prefix + id) {
			continue
		}
		t := uplinkTable(id)
		tables = append(tables, t)
		errs = append(errs, nftApply(context.Background(), "", "delete table ip "+t+"\n"))
	}
	for _, l := range hostLinks() {
		if owned(l) {
			continue
		}
		links = append(links, l)
		if err := ipCmd(context.Background(), nil, "link", "del", l); err != nil && linkExists(l) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return links, tables, fmt.Errorf("clean host namespace: %w", err)
	}
	return links, tables, nil
}
