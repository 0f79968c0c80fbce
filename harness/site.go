package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// Site is where runs happen: a private network, the lock service serving on it (a
// ZooKeeper ensemble or Redis instances, Config.Service; or an existing ensemble
// reached from it, Config.Connect), and one namespace per worker slot. Run makes one
// for itself and removes it at its end. A caller that runs many short runs on one
// service (explore's rounds) starts one with StartSite, passes it in Config.Site, and
// closes it when done: the servers are then started once, and each run leaves the
// site as it found it (faults healed, its workers gone, the servers serving).
type Site struct {
	network *netns.Network
	svc     lockservice.Service
	hosts   []netns.Host
	// version is what the servers report; quorum how long they took to serve.
	version string
	quorum  time.Duration
	// service, settings, nodes, workers and connect are what the site was made for:
	// a run must match them.
	service        kind.Name
	settings       lockservice.Settings
	nodes, workers int
	connect        string
}

// StartSite builds the network, starts the ensemble (its servers' directories under
// serversDir) and makes the worker slots' namespaces for cfg (Defaults applied). On
// error, what was made is removed.
func StartSite(ctx context.Context, cfg Config, serversDir string) (*Site, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newSite(ctx, cfg, netns.RandomID(), serversDir, func(string, ...any) {})
}

// newSite builds a site named runID (its namespaces are zlc<runID>...).
func newSite(ctx context.Context, cfg Config, runID, serversDir string, logf func(string, ...any)) (s *Site, err error) {
	start := time.Now()
	s = &Site{service: cfg.Service, settings: cfg.Settings, nodes: cfg.Nodes, workers: cfg.Workers, connect: cfg.Connect}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
			s = nil
		}
	}()
	if s.network, err = netns.Create(ctx, runID); err != nil {
		return s, fmt.Errorf("create network: %w", err)
	}
	if s.svc, err = lockservice.Start(ctx, s.network, cfg.service(serversDir), runID); err != nil {
		return s, err
	}
	s.quorum = time.Since(start)
	s.version = s.svc.Version(ctx)
	switch {
	case !s.svc.Managed():
		logf("existing %s (not managed by zlockcheck) serving at %s, reached after %s", cfg.Service.Title(), s.svc.Connect(), s.quorum.Round(time.Millisecond))
	default:
		logf("%s serving after %s (%s)", describeServers(cfg, s.version), s.quorum.Round(time.Millisecond), s.svc.Connect())
	}
	s.hosts = make([]netns.Host, cfg.Workers)
	for i := range s.hosts {
		if s.hosts[i], err = s.network.AddHost(ctx, fmt.Sprintf("w%d", i+1), workerAddr(i+1)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// fits reports why a run of cfg cannot use the site, if it cannot.
func (s *Site) fits(cfg Config) error {
	if cfg.Service != s.service || cfg.Settings != s.settings {
		return fmt.Errorf("site: made for service %s %+v, the run wants %s %+v", s.service, s.settings, cfg.Service, cfg.Settings)
	}
	if cfg.Connect != s.connect {
		return fmt.Errorf("site: made for connect %q, the run wants %q", s.connect, cfg.Connect)
	}
	if cfg.Nodes != s.nodes || cfg.Workers != s.workers {
		return fmt.Errorf("site: made for %d nodes and %d workers, the run wants %d and %d",
			s.nodes, s.workers, cfg.Nodes, cfg.Workers)
	}
	return nil
}

// clear ends every process a run left in the worker slots' namespaces (a worker still
// stopped by a fault, a child of one), so that the next run starts from none.
func (s *Site) clear() error {
	var errs []error
	for _, h := range s.hosts {
		errs = append(errs, netns.KillAll(h.Netns))
	}
	return errors.Join(errs...)
}

// Close stops the servers and removes the network, the namespaces and the links.
func (s *Site) Close() error {
	var errs []error
	if s.svc != nil {
		errs = append(errs, s.svc.Close())
	}
	if s.network != nil {
		errs = append(errs, s.network.Destroy())
	}
	return errors.Join(errs...)
}
