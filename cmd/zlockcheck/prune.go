package main

import "fmt"

// keepPolicy says which runs stay in the store: all, or only those that did not pass.
type keepPolicy string

// The keep policies of --keep.
const (
	keepAll    keepPolicy = "all"
	keepFailed keepPolicy = "failed"
)

func parseKeep(s string) (keepPolicy, error) {
	switch keepPolicy(s) {
	case keepAll, keepFailed:
		return keepPolicy(s), nil
	}
	return "", fmt.Errorf("want all or failed, got %q", s)
}
