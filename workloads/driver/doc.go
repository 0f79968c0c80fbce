// Package driver owns the client side of the worker protocol (docs/protocol.md, v1
// to v3): it starts a worker process and owns its pipes (Start), sends requests with
// their ids (Send), matches every line the worker writes to the request in flight
// (Match: a reply, a step report, an event, or a protocol violation, described by
// Violation), waits for a reply or a step report (Await), measures a v2 or v3
// worker's clock against the client's (SyncClock, Clock) and bounds how long a reply
// may take (Bounds).
//
// The harness drives a run's workers through it and package conformance holds a
// worker command to the protocol's rules through it, so both read a worker's lines
// the same way. What a line means for a run (a history, a crashed worker, a failed
// rule) is theirs: this package knows requests and lines, not locks or histories.
package driver
