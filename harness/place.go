package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// checkPlace refuses where a worker said its lock lives (workloads.LockPlace) when
// it names an entry the run's kind does not have (a GET_LOCK name on Redis), or an
// entry outside the lock it was given: a lock node not under path, a Redis key or a
// table's row key that does not hold path (a library keeps its own prefix, with the
// lock's name in the key).
func checkPlace(k kind.Kind, path string, p workloads.LockPlace) error {
	form := p.Form()
	if !slices.Contains(k.Places, form) {
		return fmt.Errorf("field lock: names a %s, which %s has none of (it takes %s)", form, k.Title, placeList(k.Places))
	}
	switch {
	case form == "node" && !strings.HasPrefix(p.Node, path+"/"):
		return fmt.Errorf("field lock.node: %q is not under the lock's path %s", p.Node, path)
	case form == "table" && !strings.Contains(p.Row, path):
		return fmt.Errorf("field lock.row: %q does not hold the lock's name %s", p.Row, path)
	}
	for _, key := range p.Keys {
		if !strings.Contains(key, path) {
			return fmt.Errorf("field lock.keys: %q does not hold the lock's name %s (the run's keys do)", key, path)
		}
	}
	return nil
}

// placeList names the places a kind takes: "keys", "table or advisory".
func placeList(places []string) string {
	switch len(places) {
	case 0:
		return "no lock place"
	case 1:
		return places[0]
	}
	return strings.Join(places[:len(places)-1], ", ") + " or " + places[len(places)-1]
}
