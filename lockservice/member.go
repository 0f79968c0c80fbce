package lockservice

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Member is one server of a run as every kind has it: its number, where it runs, the
// port its clients connect to, and its files. A kind's server type embeds it and
// adds what is its own (a ZooKeeper server's role, a database's data directory).
type Member struct {
	// ID is the server's number, from 1.
	ID int
	// Host is where it runs: starting, killing and signalling it, changing its
	// network and reading its log all go through it.
	Host nemesis.ServerHost
	// Port is its client port.
	Port int
	// Dir holds its files in the run directory: the configuration the tool wrote
	// for it (Conf) and its log (Log), among others. All are "" for a server the
	// tool does not run.
	Dir, Conf, Log string
}

// ClientAddr is the server's client address, host:port.
func (m *Member) ClientAddr() string {
	return netip.AddrPortFrom(m.Host.Addr(), uint16(m.Port)).String()
}

// What names the server in an error, noun being its kind's word for a server:
// "server 2 (10.77.1.2:5432, zlc...s2)".
func (m *Member) What(noun string) string {
	return fmt.Sprintf("%s %d (%s, %s)", noun, m.ID, m.ClientAddr(), m.Host)
}

// Check is the server as Poll looks at it: serving says whether it serves.
func (m *Member) Check(noun string, serving func(context.Context) error) ServerCheck {
	return ServerCheck{Name: fmt.Sprintf("%s %d", noun, m.ID), What: m.What(noun), Host: m.Host, Log: m.Log, Serving: serving}
}

// member is how Nodes and ClientAddrs reach the Member a kind's server type embeds.
func (m *Member) member() *Member { return m }

// Membered is a kind's server type: a pointer to a struct that embeds Member.
type Membered interface{ member() *Member }

// Nodes are the servers as the nemesis addresses them, each at its client port.
func Nodes[S Membered](servers []S) []nemesis.Server {
	out := make([]nemesis.Server, len(servers))
	for i, s := range servers {
		m := s.member()
		out[i] = nemesis.Server{ID: m.ID, Host: m.Host, ClientPort: m.Port}
	}
	return out
}

// ClientAddrs are the servers' client addresses, in order: what a kind's Connect
// joins.
func ClientAddrs[S Membered](servers []S) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.member().ClientAddr()
	}
	return out
}
