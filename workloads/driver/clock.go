package driver

import (
	"fmt"
	"math"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Clock maps a v2 or v3 worker's monotonic clock onto the client's (ns from an origin
// of the client's). The worker read its clock at some moment between the client's
// send of a clock request and its read of the reply, so the offset is known to within
// half that round trip (Err). Both clocks are the same machine's monotonic clock, so
// they run at the same rate.
type Clock struct {
	// Offset is the worker's time minus the client's, ns.
	Offset int64
	// Err bounds the offset's error, ns.
	Err int64
}

// At is the client's time of worker time mono.
func (c Clock) At(mono int64) int64 { return mono - c.Offset }

// InvokeAt is the time to record an invoke the worker stamped mono at: Err earlier
// than At, so that the recorded interval of an op contains the true one (as when the
// client stamps an invoke before it sends the request).
func (c Clock) InvokeAt(mono int64) int64 { return mono - c.Offset - c.Err }

// CompleteAt is the time to record a completion the worker stamped mono at: Err
// later than At (as when the client stamps a completion after it read the reply).
func (c Clock) CompleteAt(mono int64) int64 { return mono - c.Offset + c.Err }

// SyncClock measures a worker's clock with n clock requests (workloads.OpClock): call
// sends one and returns its reply, now is the client's clock (ns). Each reply must be
// ok with mono_ns; the fastest round trip gives the Clock.
func SyncClock(n int, now func() int64, call func(workloads.Request) (workloads.Message, error)) (Clock, error) {
	best := Clock{Err: math.MaxInt64}
	for range n {
		t0 := now()
		reply, err := call(workloads.Request{Op: workloads.OpClock})
		if err != nil {
			return Clock{}, fmt.Errorf("clock: %w", err)
		}
		t1 := now()
		if reply.Type != workloads.ReplyOK || reply.MonoNS == nil {
			return Clock{}, fmt.Errorf("clock: want an ok reply with mono_ns, got %s %s", reply.Type, reply.Error)
		}
		if e := (t1 - t0 + 1) / 2; e < best.Err {
			best = Clock{Offset: *reply.MonoNS - (t0+t1)/2, Err: e}
		}
	}
	return best, nil
}
