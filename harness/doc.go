// Package harness owns a run: it builds the run's private network, starts the ZooKeeper
// ensemble and the worker processes, drives the workload through them while recording
// the history, tears everything down on every exit path, and hands the history to the
// checker.
package harness
