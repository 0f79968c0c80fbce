// Package netns owns the host-level plumbing of a run: the network namespaces, the
// bridge and veth links the tool creates (all named with the "zlc" prefix), running
// commands inside those namespaces, and finding and removing every such object again;
// also the few objects a run or a test fixture adds to the host's own namespace (a
// run's uplink to real addresses, uplink.go; a fixture's bridge, hostnet.go), each
// recorded so that CleanupAll undoes it after a crash. Whose each object is, and
// whether its owner still lives, says the owner's file /run/zlc<id>.owner, locked by
// the owning process for its whole life (owner.go).
package netns
