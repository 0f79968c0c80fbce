package main

import "testing"

// The TCP simulator and its driver are tested in packages zksim and zksim/tcprun;
// here, the command line only (each case stops at its flags).
func TestZksimFlags(t *testing.T) {
	expectRefused(t, []flagCase{
		{[]string{"zksim"}, "--recipe is required"},
		{[]string{"zksim", "--recipe", "nonesuch"}, `unknown recipe "nonesuch"`},
		{[]string{"zksim", "--recipe", "exec"}, "--recipe exec needs --worker-cmd"},
		{[]string{"zksim", "--recipe", "zlc-mutex", "--worker-cmd", "true"}, "--worker-cmd goes with --recipe exec"},
		{[]string{"zksim", "--recipe", "exec", "--worker-cmd", "true", "--drop", "2"}, "drop rate 2 is not in [0, 1]"},
		{[]string{"zksim", "--recipe", "exec", "--worker-cmd", "true", "--workers", "0"}, "must be positive"},
		{[]string{"zksim", "--recipe", "exec", "--worker-cmd", "true", "extra"}, "unexpected arguments"},
	})
}
