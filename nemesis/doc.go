// Package nemesis owns fault injection: the real faults a run inflicts on its ZooKeeper
// servers (kill, pause, network partitions, packet loss) and on its worker processes
// (cutting a worker off, expiring its session, pausing or killing it, cutting a
// server's clients off, losing the replies to one worker), the faults made for Redis
// (restart, failover, clock-jump, connection-kill: redis.go, failover.go, clockjump.go,
// connkill.go; they reach the instances through RedisAdmin, an ability of the run's service), the catalogue of fault
// classes (classes.go), and the schedule that picks them one at a time from a seeded
// random number generator.
//
// Every fault is a typed value whose Apply does it and returns an Undo that takes it
// back; Undo is idempotent and safe after a failed or partial Apply. Network faults are
// nftables tables named with the host's TablePrefix ("zlc_*" inside the run's own
// namespaces, never the machine's), so they can always be found and removed again:
// Nemesis.HealAll undoes whatever is still active and then deletes every such table
// and resumes every stopped process.
//
// The package knows the run only through the Cluster interface, which the harness
// implements, and each server only through its ServerHost (start, kill, signal, run a
// command in its network, read its log): where the servers live is the harness's
// business. Workers always run on this machine, each in a namespace of the run, and
// client faults reach them there directly.
package nemesis
