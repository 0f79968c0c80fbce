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
		// conf is server id's configuration file, and what it must say on node addr.
		conf func(id int, addr, first string) (file string, want []string)
	}{
		{
			// RedLock's three independent instances: an instance paused or cut off
			// leaves the majority.
			name: "redis/redsync", nodes: 3, needs: []testenv.Requirement{testenv.RedisServer},
			args: []string{"--service", "redis", "--recipe", "redsync", "--nemesis", "pause,partition"},
			conf: func(id int, addr, _ string) (string, []string) { return "redis.conf", []string{"bind " + addr + "\n"} },
		},
		{
			// A primary and its streaming standby: the primary killed and paused.
			name: "postgres/pg-advisory", nodes: 2, needs: []testenv.Requirement{testenv.PostgreSQL},
			args: []string{"--service", "postgres", "--recipe", "pg-advisory", "--nemesis", "kill,pause"},
			conf: func(id int, addr, first string) (string, []string) {
				want := []string{"listen_addresses = '" + addr + "'"}
				if id == 2 {
					want = append(want, "primary_conninfo = 'host="+first)
				}
				return "postgresql.conf", want
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.RequireIntegration(t, append([]testenv.Requirement{testenv.Root, testenv.IPRoute2, testenv.NFTables}, c.needs...)...)
			nodes := testnodes.StartT(t, c.nodes)
			// The node directory's parents must let a database's own account in.
			store, nodeDir := keptIfFailed(t), filepath.Join(keptIfFailed(t), "nodes")
			args := append(append(append([]string{"run"}, c.args...), "--nemesis-interval", "3s", "--time", "12s", "--seed", "3", "--store", store), sshArgs(nodes, nodeDir)...)
			code, stdout, stderr := zlockcheck(t, args...)
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if code != exitValid {
				t.Fatalf("exit %d, want %d (valid)", code, exitValid)
			}
			assertFaultsApplied(t, stderr)
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
