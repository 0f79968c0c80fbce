package zookeeper

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestPlainLoopRefusesBadConfig(t *testing.T) {
	good := PlainLoopConfig{Servers: []string{"127.0.0.1:1"}, Path: "/l", SessionTimeout: time.Second,
		Duration: time.Second, HoldMin: time.Millisecond, HoldMax: time.Millisecond}
	for name, change := range map[string]func(*PlainLoopConfig){
		"no servers":      func(c *PlainLoopConfig) { c.Servers = nil },
		"no path":         func(c *PlainLoopConfig) { c.Path = "" },
		"no duration":     func(c *PlainLoopConfig) { c.Duration = 0 },
		"no timeout":      func(c *PlainLoopConfig) { c.SessionTimeout = 0 },
		"inverted holds":  func(c *PlainLoopConfig) { c.HoldMin = 2 * time.Millisecond },
		"a negative hold": func(c *PlainLoopConfig) { c.HoldMin, c.HoldMax = -time.Millisecond, 0 },
	} {
		cfg := good
		change(&cfg)
		if _, err := PlainLoop(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "plain loop") {
			t.Errorf("%s: %v, want a plain loop error", name, err)
		}
	}
}
