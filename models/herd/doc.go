// Package herd owns the herd-effect figure of a run: how many of the sessions waiting
// for the lock watch the lock node itself (its children: every release wakes them
// all) rather than one sibling node each (only the next waiter wakes), and how many
// requests the servers received per grant. It is measured from the servers, not from
// the recipe, so it holds for any recipe, exec included: the harness samples every
// server's watch table (the four-letter word wchc) and request counters (mntr) during
// the workload and appends each sample to the run directory's herd.jsonl (package
// rundir); Analyze turns the samples and the history's grants into a Report, the
// "herd" record of results.json.
//
// The package is pure: it parses the servers' four-letter answers and knows no
// ZooKeeper client.
package herd
