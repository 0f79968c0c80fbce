// Package netns owns the host-level plumbing of a run: the network namespaces, the
// bridge and veth links the tool creates (all named with the "zlc" prefix), running
// commands inside those namespaces, and finding and removing every such object again.
package netns
