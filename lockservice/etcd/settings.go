package etcd

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// Settings are an etcd run's own: which server release its members run.
type Settings struct {
	// Version is Debian (or "": Debian's etcd-server, 3.4) or one of Releases, built
	// from the Go module proxy into the cache by zlockcheck fetch.
	Version string `json:"etcd_version,omitempty"`
	// Client is the etcd client version of the Go recipes' workers: one of Clients,
	// or "" (ClientMatching): the members' minor release's, else zlockcheck's own.
	Client string `json:"etcd_client,omitempty"`
}

var _ lockservice.Settings = Settings{}

func init() {
	lockservice.RegisterSettings(lockservice.SettingsSpec{
		Kinds: []kind.Name{kind.Etcd}, Title: "etcd settings", Zero: Settings{}, Flags: flags,
	})
}

// flags defines the etcd settings' flags on fs.
func flags(fs *flag.FlagSet) func() (lockservice.Settings, error) {
	version := fs.String("etcd-version", "", fmt.Sprintf("with --service etcd: the members' release: %s (Debian's etcd-server, 3.4; the default) or %s, built from the Go module proxy by make setup", Debian, strings.Join(Releases(), ", ")))
	client := fs.String("etcd-client", ClientMatching, fmt.Sprintf("with --service etcd: the etcd client of the Go recipes' workers: %s (the members' minor release's when one is pinned, else zlockcheck's own) or one of %s", ClientMatching, strings.Join(Clients(), ", ")))
	return func() (lockservice.Settings, error) {
		s := Settings{Version: *version, Client: *client}
		if s.Client == ClientMatching {
			s.Client = ""
		}
		if err := validClient(s.Client); err != nil {
			return nil, fmt.Errorf("--%w", err)
		}
		if s.Version == Debian {
			s.Version = ""
		}
		if s.Version != "" {
			if _, err := module(s.Version); err != nil {
				return nil, fmt.Errorf("--%w", err)
			}
		}
		return s, nil
	}
}

// Defaults fills the number of members (three) when the run names none.
func (s Settings) Defaults(p lockservice.Plan) (lockservice.Settings, lockservice.Plan) {
	if p.SSH != nil {
		p.Nodes = len(p.SSH.Nodes)
	}
	if p.Connect != "" && p.Nodes == 0 {
		if addrs, err := lockservice.ParseHostPorts(p.Connect, DefaultConnectPort); err == nil {
			p.Nodes = len(addrs) // Validate says what is wrong with them, if anything
		}
	}
	if p.Nodes == 0 {
		p.Nodes = 3
	}
	return s, p
}

// Validate refuses what an etcd run cannot do (yet): a release or client not pinned, a cluster
// of another size (on SSH nodes: another number of nodes), a release asked of an
// existing cluster, a plain loop as processes.
func (s Settings) Validate(p lockservice.Plan) error {
	if s.Version != "" && s.Version != Debian {
		if _, err := module(s.Version); err != nil {
			return err
		}
	}
	if err := validClient(s.Client); err != nil {
		return err
	}
	if p.Connect != "" {
		addrs, err := lockservice.ParseHostPorts(p.Connect, DefaultConnectPort)
		switch {
		case err != nil:
			return err
		case p.Nodes != len(addrs):
			return fmt.Errorf("nodes: --connect names %d etcd members, --nodes says %d", len(addrs), p.Nodes)
		case s.Version != "" && s.Version != Debian:
			return errors.New("etcd-version: an existing cluster (connect) runs the release its owners installed; --etcd-version is for the members zlockcheck starts")
		}
		return nil
	}
	if p.Processes {
		return errors.New("baseline-processes: there is no plain etcd client loop yet")
	}
	if err := validateNodes(p.Nodes); err != nil && p.SSH != nil {
		return fmt.Errorf("ssh-nodes: %d nodes: an etcd cluster here has 1, 3 or 5 members, one a node", p.Nodes)
	} else if err != nil {
		return err
	}
	return nil
}

// Server is the members' configuration for the run (start).
func (s Settings) Server(p lockservice.Plan, dir string) any {
	return Config{Settings: s, Nodes: p.Nodes, Dir: dir, CacheDir: p.CacheDir}
}

// release names the members' release in the run's log and description.
func (s Settings) release() string {
	if s.Version == "" || s.Version == Debian {
		return "Debian's etcd-server"
	}
	return "release " + s.Version
}

// Describe names the members in the run's log.
func (s Settings) Describe(p lockservice.Plan, version string) string {
	if p.Connect != "" {
		return fmt.Sprintf("existing etcd %s, %d members (not managed by zlockcheck):", version, p.Nodes)
	}
	return fmt.Sprintf("etcd %s (%s), %d members:", version, s.release(), p.Nodes)
}

// Brief names the members in a run's description.
func (s Settings) Brief(p lockservice.Plan) string {
	if p.Connect != "" {
		return fmt.Sprintf("service etcd (an existing cluster of %d)", p.Nodes)
	}
	return fmt.Sprintf("service etcd (%d members, %s)", p.Nodes, s.release())
}
