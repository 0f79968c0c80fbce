package lockservice

import (
	"net/netip"
	"time"
)

// ServerAddr is the address of server id (from 1) on the run network.
func ServerAddr(id int) netip.Addr { return netip.AddrFrom4([4]byte{10, 77, 1, byte(id)}) }

// DefaultSessionTimeout is the session timeout a run's workers ask for when it names
// none: a ZooKeeper session's, a Redis lock's TTL, a database lock's heartbeat bound.
const DefaultSessionTimeout = 4 * time.Second
