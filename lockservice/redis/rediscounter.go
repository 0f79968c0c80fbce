package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The counter workload on Redis keeps its counter in a key of instance 1, the
// instance the single-instance recipes lock on (single: the instance; replicas: the
// primary); on the redlock topology, where no recipe can fence, it is still instance
// 1's, a resource beside the lock. In a cluster it is where the key's slot is
// served (home).

// MakeCounter sets the counter key path to 0.
func (r *Redis) MakeCounter(ctx context.Context, sessionTimeout time.Duration, path string) error {
	in, err := r.home(ctx, path)
	if err == nil {
		_, err = r.do(ctx, in, "SET", path, "0")
	}
	if err != nil {
		return fmt.Errorf("redis: making the counter %s: %w", path, err)
	}
	return nil
}

// ReadCounter reads the counter key path (0 when missing).
func (r *Redis) ReadCounter(ctx context.Context, sessionTimeout time.Duration, path string) (int64, error) {
	in, err := r.home(ctx, path)
	var v any
	if err == nil {
		v, err = r.do(ctx, in, "GET", path)
	}
	if err != nil {
		return 0, fmt.Errorf("redis: reading the counter %s: %w", path, err)
	}
	switch v := v.(type) {
	case nil:
		return 0, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redis: the counter %s holds %q: %w", path, v, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("redis: the counter %s: unexpected reply %v", path, v)
}
