package zookeeper

import "testing"

func TestIsHeapSize(t *testing.T) {
	for s, want := range map[string]bool{"256m": true, "1g": true, "1G": true, "65536": true, "512k": true,
		"": false, "0m": false, "1gg": false, "m": false, "1.5g": false, "-1g": false, "1t": false} {
		if got := isHeapSize(s); got != want {
			t.Errorf("isHeapSize(%q) = %v, want %v", s, got, want)
		}
	}
}
