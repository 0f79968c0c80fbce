package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestSSHRunsEveryKind: the kinds other than ZooKeeper (whose SSH runs are
// ssh_e2e_test.go's) on SSH nodes of the test's own (namespaces it made), each under
// server faults made on the nodes that its lock survives, is valid; each server's
// configuration, naming its node's address, and its log come back into the run
// directory, and nothing is left on the nodes or on this machine. One after the
// other: the nodes' bridge and the runs' uplinks are host links the side-by-side
// runs' leftover checks would count.
func TestSSHRunsEveryKind(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes int
		needs []testenv.Requirement
		args  []string
		// landed is a fault class that must have been applied at least once.
		landed string
		// honest: the run may be invalid by an unfenced overlap only.
		honest bool
		// conf is server id's configuration file, and what it must say on node addr.
		conf func(id int, addr, first string) (file string, want []string)
		// long, when set, says why the row is left to make test-long.
		long string
	}{
		{
			// RedLock's three independent instances: an instance paused or cut off
			// leaves the majority.
			name: "redis/redsync", nodes: 3, needs: []testenv.Requirement{testenv.RedisServer},
			args: []string{"--service", "redis", "--recipe", "redsync", "--nemesis", "pause,partition"},
			conf: func(id int, addr, _ string) (string, []string) { return "redis.conf", []string{"bind " + addr + "\n"} },
		},
		{
			// A primary and its streaming standby: failed over to the standby (the old primary rebuilt on its node as the new
			// one's standby) at least once. A session lock on a primary that
			// crashed may overlap its successor's on the promoted standby: an
			// honest unfenced overlap, never a recipe bug.
			name: "postgres/pg-advisory", nodes: 2, needs: []testenv.Requirement{testenv.PostgreSQL},
			args:   []string{"--service", "postgres", "--recipe", "pg-advisory", "--nemesis", "failover"},
			landed: "failover", honest: true,
			conf: func(id int, addr, first string) (string, []string) {
				want := []string{"listen_addresses = '" + addr + "'"}
				if id == 2 {
					want = append(want, "primary_conninfo = 'host="+first)
				}
				return "postgresql.conf", want
			},
		},
		{
			// One MariaDB server, killed (and restarted): a session lock
			// the server lost with its restart may overlap its successor's, an
			// honest unfenced overlap.
			name: "mariadb/mariadb-getlock", nodes: 1, needs: []testenv.Requirement{testenv.MariaDB},
			args:   []string{"--service", "mariadb", "--recipe", "mariadb-getlock", "--nemesis", "kill"},
			landed: "kill", honest: true,
			conf: func(id int, addr, _ string) (string, []string) {
				return "my.cnf", []string{"bind-address = " + addr + "\n"}
			},
			long: "a third server on SSH nodes under kill; make test keeps Redis and PostgreSQL there, and mariadb-getlock under kill in namespaces (TestEveryKindRunsValid)",
		},
		{
			// Three etcd members (Debian's, from the nodes' PATH), one killed (and
			// restarted) at a time: the quorum stays, and the lock with it.
			name: "etcd/etcd-mutex", nodes: 3, needs: []testenv.Requirement{testenv.Etcd},
			args:   []string{"--service", "etcd", "--recipe", "etcd-mutex", "--nemesis", "kill", "--nemesis-targets", "one"},
			landed: "kill",
			conf: func(id int, addr, _ string) (string, []string) {
				return "etcd.conf.yml", []string{`listen-client-urls: "http://` + addr + `:2379"`}
			},
			long: "a fourth kind on SSH nodes; make test runs etcd's members in namespaces under kill and partition (TestEveryKindRunsValid)",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.long != "" {
				testenv.Long(t, c.long)
			}
			testenv.RequireIntegration(t, append([]testenv.Requirement{testenv.Root, testenv.IPRoute2, testenv.NFTables}, c.needs...)...)
			nodes := testnodes.StartT(t, c.nodes)
			// The node directory's parents must let a database's own account in.
			store, nodeDir := keptIfFailed(t), filepath.Join(keptIfFailed(t), "nodes")
			args := append(append(append([]string{"run", "--nemesis-interval", "3s"}, c.args...), "--time", "8s", "--seed", "3", "--store", store), sshArgs(nodes, nodeDir)...)
			code, stdout, stderr := zlockcheck(t, args...)
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			switch {
			case c.honest && code == exitInvalid && (!strings.Contains(stdout, "UNFENCED OVERLAP") || strings.Contains(stdout, "RECIPE BUG")):
				t.Fatalf("exit %d, and not by an unfenced overlap alone", code)
			case code != exitValid && !(c.honest && code == exitInvalid):
				t.Fatalf("exit %d, want %d (valid)", code, exitValid)
			}
			assertFaultsApplied(t, stderr)
			if c.landed != "" && !applied(stderr, c.landed) {
				t.Errorf("no %s was applied", c.landed)
			}
			for id := 1; id <= c.nodes; id++ {
				dir := filepath.Join(store, "latest", "servers", fmt.Sprintf("s%d", id))
				file, want := c.conf(id, nodes.Addrs[id-1].String(), nodes.Addrs[0].String())
				conf, err := os.ReadFile(filepath.Join(dir, file))
				for _, w := range want {
					if err != nil || !strings.Contains(string(conf), w) {
						t.Errorf("server %d: %s does not say %q (%v):\n%s", id, file, w, err, conf)
					}
				}
				if _, err := os.Stat(filepath.Join(dir, "server.log")); err != nil {
					t.Errorf("server %d: %v", id, err)
				}
			}
			assertNothingLeftOnNodes(t, store, nodes, nodeDir)
		})
	}
}

// applied reports whether the run's log shows a fault of class applied without error.
func applied(stderr, class string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "nemesis: stop ") && strings.Contains(line, `"fault":"`+class+`"`) && !strings.Contains(line, `"error"`) {
			return true
		}
	}
	return false
}
