package harness

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// A run against an existing ensemble (Config.Connect, `run --connect`) tests servers
// the tool does not manage: it starts, stops, signals and reconfigures none of them.
// The workers and the harness reach them through the run network's uplink
// (netns.AddUplink); the run writes only under its chroot (Config.Chroot), which must
// not exist before the run and is deleted at its end.

// DefaultChrootParent is where a --connect run's chroot goes when none is given:
// DefaultChrootParent/<run id>.
const DefaultChrootParent = "/zlockcheck"

// validateConnect checks the --connect fields: the chroot, and that no fault needs a
// server the tool manages (the addresses are the kind's to check: its settings'
// Validate).
func (c Config) validateConnect() error {
	if c.Connect == "" {
		if c.Chroot != "" {
			return errors.New("chroot: only for a run against an existing ensemble (connect)")
		}
		return nil
	}
	if err := checkChroot(c.Chroot); err != nil {
		return err
	}
	for _, cl := range c.Nemesis {
		if cl.ServerFault() && cl != nemesis.ClassClientServerPartition {
			return fmt.Errorf("nemesis: %s acts on the servers, and a run against an existing ensemble (connect) does not manage them; its faults are the client ones: %s",
				cl, strings.Join(clientClasses(), ", "))
		}
	}
	return nil
}

func clientClasses() []string {
	var out []string
	for _, cl := range nemesis.Classes() {
		if !cl.ServerFault() || cl == nemesis.ClassClientServerPartition {
			out = append(out, string(cl))
		}
	}
	return out
}

// checkChroot accepts "" (the default is set per run) or a clean absolute znode path
// other than / and ZooKeeper's own /zookeeper.
func checkChroot(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
		return fmt.Errorf("chroot: want a clean absolute znode path such as /zlockcheck/test, got %q", p)
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return fmt.Errorf("chroot: %q is ZooKeeper's own subtree", p)
	}
	return nil
}

// named fills the run-specific defaults once the run has its id: the chroot.
func (c Config) named() Config {
	if c.Connect != "" && c.Chroot == "" {
		c.Chroot = path.Join(DefaultChrootParent, c.RunID)
	}
	return c
}

// lockPath is the znode under which the workers take the lock: /zlc/<run>/<key> on
// the run's own ensemble, <chroot>/<key> on an existing one.
func (c Config) lockPath() string {
	if c.Connect != "" {
		return path.Join(c.Chroot, c.Workload.Key)
	}
	return fmt.Sprintf("/zlc/%s/%s", c.RunID, c.Workload.Key)
}

// lockQuorum are the keys a recipe whose lock is a majority of keys (its catalogue
// entry's ClusterQuorum: locknames.ClusterRedLockKeys) keeps the lock at lockPath
// in; nil for the others, whose lock is the path itself.
func (c Config) lockQuorum() []string {
	if r, ok := findRecipe(c.Recipe); ok && r.ClusterQuorum {
		return locknames.ClusterRedLockKeys(c.lockPath())
	}
	return nil
}

// lockKey is the key the service is told the lock lives at (SetLockKey: a Redis
// Cluster's leader is its primary): the first of the quorum's keys, whose primary
// serves a majority of them, else the lock's path.
func (r *runner) lockKey() string {
	if len(r.lockQuorum) > 0 {
		return r.lockQuorum[0]
	}
	return r.lockPath
}

// makeChroot creates a --connect run's chroot (a no-op on the run's own ensemble) and
// notes in the outcome that the ensemble was an existing one.
func (r *runner) makeChroot(ctx context.Context) error {
	if r.svc.Managed() {
		return nil
	}
	r.out.ServerVersion += " (existing, not managed by zlockcheck)"
	rm, ok := r.svc.(rootMaker)
	if !ok {
		return fmt.Errorf("connect: the service cannot make the run's root %s", r.cfg.Chroot)
	}
	// What was made before an error is removed at teardown too.
	undo, err := rm.PrepareRoot(ctx, r.cfg.SessionTimeout, r.cfg.Chroot)
	r.undoChroot = undo
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	r.logf("chroot %s: the run writes only under it and deletes it at its end", r.cfg.Chroot)
	return nil
}

// removeChroot deletes what makeChroot made, on every exit path of a --connect run.
func (r *runner) removeChroot() error {
	if r.undoChroot == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RecoverBound())
	defer cancel()
	// The workers' sessions may outlive them by a session timeout: their ephemeral
	// nodes go with them, or are deleted here.
	if err := r.undoChroot(ctx, 2*r.cfg.SessionTimeout); err != nil {
		return err
	}
	r.undoChroot = nil
	return nil
}
