package workloads

import "time"

// Plan is the cycle as one protocol v2/v3 request (OpCycle): the worker runs it on its
// own and reports each step. It is false for a cycle that needs the harness inside
// its critical section (the counter workload reads and writes between acquire and
// release: its cycles stay on v1 steps) and for the final phase's cycle (no hold).
// The harness still walks the cycle with Next and Done as the reports come in, so a
// planned cycle means exactly what a stepped one means.
func (c *Cycle) Plan() (Request, bool) {
	if c.counter || c.noHold {
		return Request{}, false
	}
	req := c.acquire
	req.ID, req.Op = 0, OpCycle
	req.Depth = max(c.depth, 1)
	req.HoldUS = c.hold.Microseconds()
	if req.HoldUS == 0 && c.hold > 0 {
		req.HoldUS = 1
	}
	return req, true
}

// HoldFor is how long a planned cycle holds (Plan's HoldUS).
func HoldFor(req Request) time.Duration { return time.Duration(req.HoldUS) * time.Microsecond }
