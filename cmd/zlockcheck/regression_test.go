package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordedHistories re-checks real histories kept from earlier runs (see
// testdata/histories/README.md): the verdict and the witness must not change.
func TestRecordedHistories(t *testing.T) {
	cases := []struct {
		file     string
		args     []string
		wantCode int
		wantOut  []string
	}{
		{"gozk-server-faults-valid.jsonl", nil, exitValid, []string{"VALID"}},
		{"gozk-client-pause-overlap.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"gozk-counter-client-pause-lost-update.jsonl", nil, exitInvalid, []string{"key counter: invalid", "lost update", "advisory"}},
		{"unprotected-create-reply-loss-orphan.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "ORPHAN"}},
		{"ignore-lost-vary-client-partition.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"curator-zombie-follower.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"zlc-mutex-zombie-observer.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"kazoo-lock-zksim-expired-while-stalled.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"curator-kept-worker-orphan.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "ORPHAN"}},
		{"gozk-unlock-lost-orphan.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "ORPHAN", "left there, most likely, by the release of process 3 that ended unknown"}},
		{"mutant-withdrawn-watch-orphan.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "could never be granted again", "ORPHAN"}},
		{"mutant-missed-wakeup-narrow-race.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "a missed wake-up", "the final phase then granted every worker"}},
		{"delete-lowest-stall.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "ended early at 13.9s", "79 more (79 of them orphans"}},
		{"redis-lock-restart-none.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redis-lock-failover.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redis-lock-clock-jump.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redislock-sentinel-kills-two-primaries.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redislock-sentinel-minority-primary.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redis-lock-sentinel-split-renewals.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redislock-sentinel-paused-at-grant.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redislock-cluster-minority-primary.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redsync-one-cluster-minority-primary.jsonl", nil, exitInvalid, []string{"2 holders at once", "process 1 held", "process 0 held"}},
		{"redis-lock-cluster-token-set-back.jsonl", nil, exitInvalid, []string{"fencing tokens checker", "SERVER LOST THE LOCK", "token counter back"}},
		{"redis-lock-counter-client-pause-lost-update.jsonl", nil, exitInvalid, []string{"key counter: invalid", "lost update", "advisory"}},
		{"redis-lock-counter-fenced-client-pause-valid.jsonl", nil, exitValid, []string{"VALID", "advisory", "2 holders at once"}},
		{"mutant-redis-ignore-validity-cut-off.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"mutant-redis-blind-del-late-del.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"mutant-redis-static-value-late-del.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"mutant-redis-setnx-then-expire-no-ttl.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "session expired"}},
		{"mutant-redis-no-expiry-dead-holder.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "session expired"}},
		{"mutant-redlock-minority-race.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"mutant-redlock-no-elapsed-check-expiry-race.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"mutant-redis-extend-recreates-clock-jump.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"mutant-redis-blind-extend-renewed.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redisson-lock-watchdog-restart.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redisson-fenced-clock-jump-restart.jsonl", nil, exitInvalid, []string{"2 holders at once", "key tokens:l0: invalid", "SERVER LOST THE LOCK", "with fencing token 1"}},
		{"redisson-redlock-cut-off-holder.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redisson-fenced-counter-client-pause-lost-update.jsonl", nil, exitInvalid, []string{"key counter: invalid", "lost update", "advisory"}},
		{"redisson-fenced-counter-fenced-client-pause-valid.jsonl", nil, exitValid, []string{"VALID", "advisory", "2 holders at once"}},
		{"redisson-lock-lease-failover-grant-in-flight.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"spring-redis-lock-renewed-clock-jump.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"python-redis-lock-renewal-clock-jump.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redis-semaphore-mutex-cut-off-holder.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"redis-semaphore-mutex-client-pause-release-unchecked.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"node-redlock-split-votes-no-faults.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "did not acquire within the final bound"}},
		{"python-redis-lock-vanished-holder-blpop.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "worker died or did not answer"}},
		{"pals-lock-connection-kill.jsonl", nil, exitInvalid, []string{"2 holders at once", "process 1 held"}},
		{"redis-py-lock-setnx-resend-own-key.jsonl", nil, exitValid, []string{"VALID"}},
		{"spring-jdbc-mariadb-vanished-pools.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "CONFIGURATION", "Too many connections", "tcp_keepalive_time"}},
		{"pg-table-failover-release-lost.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "SERVER LOST THE LOCK", "synchronous_standby_names"}},
		{"etcd-mutex-done-late-cut-off-holder.jsonl", nil, exitInvalid, []string{"2 holders at once"}},
		{"etcd-election-done-late-cut-off-holder.jsonl", nil, exitInvalid, []string{"2 holders at once", "process 0 held"}},
		{"etcd-mutex-unlock-retried-22082.jsonl", nil, exitInvalid, []string{"2 holders at once", "process 4 held"}},
		{"etcd-node-lock-client-pause-release-unchecked.jsonl", nil, exitInvalid, []string{"2 holders at once", "process 3 held"}},
		{"etcd-node-lock-lost-late-cut-off-holder.jsonl", nil, exitInvalid, []string{"2 holders at once", "process 1 held"}},
		{"etcd-python-lock-cut-off-holder-never-told.jsonl", nil, exitInvalid, []string{"2 holders at once", "process 1 held", "process 3 held"}},
		{"etcd-mutex-19597-revoked-waiter-waits.jsonl", nil, exitValid, []string{"VALID", "8  client faults that landed while their target was acquiring (session-expire 8)"}},
		{"etcd-mutex-3.4-deposed-leader-requests-stall.jsonl", nil, exitValid, []string{"VALID", "12  acquires that timed out while queued behind another"}},
		{"pg-advisory-client-vanish-keepalive.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "CONFIGURATION", "vanished with its host", "tcp_keepalives_idle"}},
		{"pg-advisory-killed-nested-holder.jsonl", []string{"--model", "reentrant"}, exitInvalid, []string{"2 holders at once"}},
		{"pg-advisory-lock-timeout-after-grant.jsonl", []string{"--model", "reentrant"}, exitInvalid, []string{"key liveness: invalid", "slot 1, process 7: fail after 7.3s"}},
		{"mariadb-getlock-kill-at-grant.jsonl", []string{"--model", "reentrant"}, exitInvalid, []string{"2 holders at once"}},
		{"pg-table-killed-holder-no-expiry.jsonl", nil, exitInvalid, []string{"key liveness: invalid", "RECIPE BUG", "nothing removes the entry of an owner that died"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			args := append([]string{"check"}, c.args...)
			args = append(args, filepath.Join("..", "..", "testdata", "histories", c.file))
			code, stdout, stderr := zlockcheck(t, args...)
			if code != c.wantCode {
				t.Errorf("exit %d, want %d\n%s%s", code, c.wantCode, stdout, stderr)
			}
			for _, want := range c.wantOut {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
		})
	}
}
