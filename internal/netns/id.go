package netns

import (
	"crypto/rand"
	"encoding/hex"
)

// RandomID returns 6 random hex digits, to tell runs (and their namespaces, zlc<id>…)
// apart on the host.
func RandomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
