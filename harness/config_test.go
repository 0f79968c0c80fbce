package harness

import (
	"strings"
	"testing"
	"time"
)

func TestIsHeapSize(t *testing.T) {
	for s, want := range map[string]bool{"256m": true, "1g": true, "1G": true, "65536": true, "512k": true,
		"": false, "0m": false, "1gg": false, "m": false, "1.5g": false, "-1g": false, "1t": false} {
		if got := isHeapSize(s); got != want {
			t.Errorf("isHeapSize(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestBaselineWarmupValidation(t *testing.T) {
	c := Config{WorkerArgv: []string{"w"}, Baseline: true}.Defaults()
	for warmup, ok := range map[time.Duration]bool{0: true, 10 * time.Second: true, -time.Second: false} {
		c.BaselineWarmup = warmup
		err := c.Validate()
		if ok && err != nil || !ok && (err == nil || !strings.Contains(err.Error(), "baseline-warmup")) {
			t.Errorf("BaselineWarmup %s: %v, want ok %v", warmup, err, ok)
		}
	}
	if (Config{}).Defaults().BaselineWarmup != 0 || DefaultConfig().BaselineWarmup <= 0 {
		t.Errorf("the warm-up is a default of the CLI's (DefaultConfig), and 0 (none) in a Config built by hand")
	}
}
