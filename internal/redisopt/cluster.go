package redisopt

import (
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis Cluster splits the keys into SlotCount hash slots, each served by one
// primary: a key's slot is CRC16 of the key (or of its hash tag, the part between
// the first "{" and the next "}", when that part is not empty) modulo SlotCount. A
// script's keys must all hash to one slot. The harness finds where a lock lives by
// KeySlot; the recipes keep a lock's companion keys in its slot by SameSlot.

// SlotCount is the number of Redis Cluster hash slots.
const SlotCount = 16384

// KeySlot is the hash slot of key, as Redis Cluster computes it (CLUSTER KEYSLOT).
func KeySlot(key string) int {
	return int(crc16(hashTag(key)) % SlotCount)
}

// hashTag is the part of key that is hashed: its hash tag when it has a non-empty
// one, else the whole key.
func hashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

// SameSlot names a key kept beside key under suffix (a lock's fencing counter,
// key+":fence") so that it hashes to key's slot on a Redis Cluster: key+suffix when
// key has a hash tag of its own (suffix must add no brace), else "{key}"+suffix,
// whose hash tag is key itself. A key with a "}" but no hash tag has no such
// name: an error.
func SameSlot(key, suffix string) (string, error) {
	switch {
	case strings.ContainsAny(suffix, "{}"):
		return "", fmt.Errorf("redis cluster: suffix %q of key %q holds a brace", suffix, key)
	case hashTag(key) != key:
		return key + suffix, nil
	case strings.Contains(key, "}"):
		return "", fmt.Errorf("redis cluster: key %q holds a \"}\" but no hash tag: no key beside it can share its slot", key)
	}
	return "{" + key + "}" + suffix, nil
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// ClusterStateReload is how often a lock's cluster client asks the cluster again
// which primary serves each slot (go-redis's ClusterStateReloadInterval; its
// default is 60 s). go-redis asks again at once after a MOVED or READONLY reply,
// but not after a dial error: a client whose primary was killed would dial it
// until the next reload, long after the cluster promoted its replica (about a
// node timeout, a second by default here).
const ClusterStateReload = time.Second

// Cluster returns the options of a lock's client of a Redis Cluster whose
// instances are addrs (go-redis's cluster client: it asks them which primary
// serves each slot and sends each command to the primary of its key's slot), with
// Lock's options for every connection to every instance (one connection each,
// every wait bounded by limit), and:
//   - MaxRedirects -1: no command is sent twice. go-redis's cluster client would
//     otherwise send a command again after a read timeout or EOF (to the same
//     instance, then another) and follow MOVED and ASK replies: a MOVED, ASK,
//     READONLY or CLUSTERDOWN reply and a broken connection come back to the
//     caller instead, as MaxRetries -1 makes them for one instance;
//   - ClusterStateReloadInterval ClusterStateReload.
func Cluster(addrs []string, limit time.Duration) *redis.ClusterOptions {
	o := Lock("", limit)
	return &redis.ClusterOptions{
		Addrs:                      addrs,
		MaxRedirects:               -1,
		ClusterStateReloadInterval: ClusterStateReload,
		Password:                   o.Password,
		Protocol:                   o.Protocol,
		DisableIdentity:            o.DisableIdentity,
		MaintNotificationsConfig:   &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:                 o.MaxRetries,
		ContextTimeoutEnabled:      o.ContextTimeoutEnabled,
		DialTimeout:                o.DialTimeout,
		DialerRetries:              o.DialerRetries,
		ReadTimeout:                o.ReadTimeout,
		WriteTimeout:               o.WriteTimeout,
		PoolTimeout:                o.PoolTimeout,
		PoolSize:                   o.PoolSize,
		MaxActiveConns:             o.MaxActiveConns,
		ConnMaxIdleTime:            o.ConnMaxIdleTime,
		PipelinePoolSize:           o.PipelinePoolSize,
	}
}
