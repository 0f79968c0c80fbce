package driver

import "time"

// Bounds say how long a client waits for a worker's replies. They derive from the
// session timeout the workers ask for in init, in this one place: the harness's runs
// and the conformance rules allow the same.
type Bounds struct {
	// SessionTimeout is the session timeout sent in init.
	SessionTimeout time.Duration
}

// ReplyLimit is how long to wait for the reply to a request that may itself wait up
// to wait (an acquire's timeout): a recipe may need its session timeout more than
// once to answer honestly (gozk's timed-out acquire closes its session and opens a
// new one before replying).
func (b Bounds) ReplyLimit(wait time.Duration) time.Duration {
	return wait + 3*b.SessionTimeout + 5*time.Second
}

// InitReplyLimit is how long a new worker may take to answer init (start its
// runtime, connect, open its session).
func (b Bounds) InitReplyLimit() time.Duration { return 2*b.SessionTimeout + 10*time.Second }
