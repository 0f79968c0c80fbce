package main

import (
	"strings"
	"testing"
)

// The conformance suite itself is tested in package conformance; here, the command
// line only (no ZooKeeper is started: each case stops at its flags).
func TestConformanceFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"conformance"}, "--worker-cmd is required"},
		{[]string{"conformance", "--worker-cmd", "true", "--kind", "nonesuch"}, "--kind"},
		{[]string{"conformance", "--worker-cmd", "true", "extra"}, "unexpected arguments"},
		{[]string{"conformance", "--worker-cmd", "true", "--rules", "nonesuch"}, `no rule "nonesuch"`},
	}
	for _, tc := range cases {
		var stdout, stderr strings.Builder
		code := realMain(tc.args, &stdout, &stderr)
		if code != exitError || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), exitError, tc.want)
		}
	}
}
