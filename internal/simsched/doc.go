// Package simsched owns the machinery that zksim and redsim share to put a lock
// recipe through a simulated lock service under a scheduler: the schedule (its step
// kinds' contract, steps, and their text format), the rapid lock property's runner
// (it draws a schedule, runs it in a testing/synctest bubble, checks that a failure
// replays, reports it and replays a schedule), the minimizing pass over a failing
// schedule after rapid's shrinking, the failures a run reports, the
// server's end of a connection inside the bubble, and the adapter that runs one of
// the harness's recipes on a simulator.
//
// What is the service's own stays in its simulator: the step kinds and what each
// does, the lock run's bookkeeping of its processes and of the service's state, and
// the checks of a run.
package simsched
