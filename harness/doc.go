// Package harness owns a test: Run builds the run's private network, starts the lock
// service's servers (package lockservice) and the worker processes (spoken to through
// workloads/driver), drives the workload through them while recording the history,
// and tears everything down on every exit path; Test runs, checks (report, models) and
// keeps a run in one call, and is what the commands, the matrix, suites and explore
// (harness/explore) call.
package harness
