package workloads

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// LockPlace is where a worker's lock lives on the service, as an acquire's ok may
// say (protocol addition "lock", any version; docs/protocol.md): the server-side id
// of the connection that holds it and the one entry it made. The harness reads it to
// aim connection-kill at the connection that holds, and to know whether ending that
// connection frees the lock. A worker that says nothing keeps the harness's guesses
// (its last session event; the recipe's catalogue entry).
type LockPlace struct {
	// Session is the connection that holds the lock, spelt as session events spell
	// ids ("0x1f": a Redis CLIENT ID, a PostgreSQL backend pid, a MariaDB connection
	// id, a ZooKeeper session).
	Session string `json:"session,omitempty"`
	// Exactly one entry: a ZooKeeper lock node; Redis keys (RedLock: the same keys
	// on every instance) and the value written; a SQL lock table and the row's key;
	// a PostgreSQL advisory key (one bigint, or two ints); a GET_LOCK name.
	Node     string   `json:"node,omitempty"`
	Keys     []string `json:"keys,omitempty"`
	Value    string   `json:"value,omitempty"`
	Table    string   `json:"table,omitempty"`
	Row      string   `json:"row,omitempty"`
	Advisory []int64  `json:"advisory,omitempty"`
	GetLock  string   `json:"get_lock,omitempty"`
}

// SessionBound reports whether the lock goes with its session's connection, as a
// PostgreSQL advisory lock and GET_LOCK do; a lock node, a Redis key or a table's row
// outlives the connection that made it (until its session expires, its TTL passes or
// someone deletes it).
func (p LockPlace) SessionBound() bool { return len(p.Advisory) > 0 || p.GetLock != "" }

// Form names the place's entry as the protocol spells its field: node, keys,
// table, advisory or get_lock ("" when it names none).
func (p LockPlace) Form() string {
	forms := p.forms()
	if len(forms) != 1 {
		return ""
	}
	return forms[0]
}

// forms lists the entry fields p sets.
func (p LockPlace) forms() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"node", p.Node != ""}, {"keys", len(p.Keys) > 0}, {"table", p.Table != ""}, {"advisory", len(p.Advisory) > 0}, {"get_lock", p.GetLock != ""}} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// Validate refuses a place that names no entry or several, or an entry's fields
// apart from it (a value without keys, a row without its table), or an advisory key
// of other than one or two numbers.
func (p LockPlace) Validate() error {
	switch forms := p.forms(); {
	case len(forms) == 0:
		return errors.New("field lock: names no entry (want one of node, keys, table, advisory, get_lock)")
	case len(forms) > 1:
		return fmt.Errorf("field lock: names %d entries (%v); a lock lives in one", len(forms), forms)
	case p.Value != "" && len(p.Keys) == 0:
		return errors.New("field lock.value: the value of Redis keys, without keys")
	case p.Row != "" && p.Table == "":
		return errors.New("field lock.row: a row of a lock table, without table")
	case p.Table != "" && p.Row == "":
		return errors.New("field lock.table: names no row")
	case len(p.Advisory) > 2:
		return fmt.Errorf("field lock.advisory: want one bigint key or two int keys, got %d", len(p.Advisory))
	}
	for _, k := range p.Keys {
		if k == "" {
			return errors.New("field lock.keys: an empty key")
		}
	}
	return nil
}

// Within refuses p when it names an entry the run's kind does not have (a GET_LOCK name on Redis), or an
// entry outside the lock it was given: a lock node not under path, a Redis key or a
// table's row key that does not hold path (a library keeps its own prefix, with the
// lock's name in the key).
func (p LockPlace) Within(k kind.Kind, path string) error {
	form := p.Form()
	if !slices.Contains(k.Places, form) {
		return fmt.Errorf("field lock.%s: %s has no lock of that kind (its locks are %s)", form, k.Title, placeList(k.Places))
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
