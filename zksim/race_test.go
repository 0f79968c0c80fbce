//go:build race

package zksim

// raceEnabled: the race detector slows runs down so much that rapid's shrinking
// runs out of time (-rapid.shrinktime) before it is done.
const raceEnabled = true
