package etcd

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
)

// The Go etcd recipes (etcd-mutex and its peers) are served by zlockcheck itself
// (`zlockcheck worker`), built with one etcd client: go.mod's, ClientModule at
// OwnClient. A run whose members run another release is served by a build of
// zlockcheck against that release's client: `make build` builds one beside
// bin/zlockcheck for each pin of clients/ (go build -modfile=clients/vX/client.mod,
// the module's go.mod with the client's modules at X, written by
// scripts/etcd-client-pins.sh), named zlockcheck-etcd-client-vX. Settings.Client
// picks one; by default the one whose minor release is the members'.

// clientsFS holds the pinned clients' module files: the one place a client is added.
//
//go:embed clients/*/client.mod
var clientsFS embed.FS

// ClientModule is the etcd client's module.
const ClientModule = "go.etcd.io/etcd/client/v3"

// ClientMatching is --etcd-client's default: the client of the members' minor
// release, when one is pinned; else zlockcheck's own.
const ClientMatching = "matching"

// Clients are the client versions --etcd-client takes: the pinned builds' and
// zlockcheck's own, oldest first.
func Clients() []string { return clients(OwnClient()) }

// clients are the pinned clients and own.
func clients(own string) []string {
	out := pinnedClients()
	if own != "" && !slices.Contains(out, own) {
		out = append(out, own)
	}
	slices.SortFunc(out, compareVersions)
	return out
}

// pinnedClients are the client versions clients/ pins.
func pinnedClients() []string { return versionDirs(clientsFS, "clients") }

// OwnClient is the version of the etcd client this binary was built with ("3.6.16"),
// "" when its build information does not say.
func OwnClient() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == ClientModule {
			return strings.TrimPrefix(d.Version, "v")
		}
	}
	return ""
}

// minor is "3.5" of "3.5.35".
func minor(v string) string {
	if i := strings.LastIndex(v, "."); i > 0 {
		return v[:i]
	}
	return v
}

// client is the client version the run's workers use, zlockcheck's own being own:
// Client, or the one matching the members' release (Debian's 3.4 has no client
// that builds beside zlockcheck's gRPC: zlockcheck's own serves it).
func (s Settings) client(own string) string {
	if s.Client != "" && s.Client != ClientMatching {
		return s.Client
	}
	if s.Version != "" && s.Version != Debian {
		for _, c := range clients(own) {
			if minor(c) == minor(s.Version) {
				return c
			}
		}
	}
	return own
}

// validClient is nil when v names a client --etcd-client takes.
func validClient(v string) error {
	if v == "" || v == ClientMatching || slices.Contains(Clients(), v) {
		return nil
	}
	return fmt.Errorf("etcd-client: want %s or one of %s (lockservice/etcd/clients pins them), got %q", ClientMatching, strings.Join(Clients(), ", "), v)
}

// GoWorker is the zlockcheck binary that serves the run's Go recipes: self, or the
// build of it beside self against the run's client. A build not there, or older
// than self (self was rebuilt alone), is an error that says to run make build.
func (s Settings) GoWorker(self string) (string, error) { return s.goWorker(self, OwnClient()) }

// goWorker is GoWorker in a binary whose own client is own.
func (s Settings) goWorker(self, own string) (string, error) {
	c := s.client(own)
	if c == "" || c == own {
		return self, nil
	}
	bin := filepath.Join(filepath.Dir(self), "zlockcheck-etcd-client-v"+c)
	st, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("etcd-client %s: no build of zlockcheck against it beside %s (%s): run make build, which builds one for each pin of lockservice/etcd/clients", c, self, bin)
	}
	if me, err := os.Stat(self); err == nil && st.ModTime().Before(me.ModTime()) {
		return "", fmt.Errorf("etcd-client %s: %s is older than %s (rebuilt alone?): run make build, which builds both", c, bin, self)
	}
	return bin, nil
}
