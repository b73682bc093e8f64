package redislock

import (
	"strconv"
	"strings"
	"sync"
)

// hashTag returns the part of key that Redis Cluster hashes: the content of the first {…} pair
// when it is not empty, else the whole key.
func hashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

// Channel returns the release-notice channel of a lock key. It hashes to the key's cluster slot,
// so a script can SPUBLISH to it: a key with a hash tag keeps it, other keys become the tag. (A
// key without a valid tag but with a '}' cannot be tagged: its channel may land in another slot,
// and its waiters then rely on timers alone.)
func Channel(key string) string {
	if tag := hashTag(key); tag != key || strings.IndexByte(key, '}') >= 0 {
		return key + ":locker:released"
	}
	return "{" + key + "}:locker:released"
}

// Slot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag, modulo 16384.
func Slot(key string) uint16 { return crc16(hashTag(key)) % 16384 }

// crc16 is CRC16/XMODEM, the checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for _, b := range []byte(s) {
		crc ^= uint16(b) << 8
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

// Companion returns the name of a key that belongs to the lock key (its fencing counter, its
// request markers): key, then ":locker:" and suffix, in key's cluster slot so that one script can
// touch both, and starting with key so that an ACL key pattern for the locks covers it too.
//   - A key with a hash tag keeps it: "{user}:7" gives "{user}:7:locker:fence".
//   - A key without braces becomes its own tag: "job" gives "job{job}:locker:fence".
//   - A key with braces but no valid tag (rare: "a{b", "x{}y") cannot keep its slot when
//     anything is appended, so it gets a tag of its slot in front: "{<tag>}x{}y:locker:fence".
func Companion(key, suffix string) string { return companion(key, suffix, "") }

// companion is Companion(key, suffix+more), in one allocation.
func companion(key, suffix, more string) string {
	switch {
	case hashTag(key) != key:
		return key + ":locker:" + suffix + more
	case strings.IndexByte(key, '{') < 0 && strings.IndexByte(key, '}') < 0:
		return key + "{" + key + "}:locker:" + suffix + more
	default:
		return "{" + slotTag(Slot(key)) + "}" + key + ":locker:" + suffix + more
	}
}

// FenceKey returns the name of the fencing counter of the lock key: Companion(key, "fence").
func FenceKey(key string) string { return companion(key, "fence", "") }

// MarkerKey returns the name of the marker of request id on the lock key: Companion(key,
// "req:"+id).
func MarkerKey(key, id string) string { return companion(key, "req:", id) }

// slotTag returns a short string whose slot is slot: the smallest number, in base 36, that
// hashes to it. The table is built on first use (about 160,000 hashes).
func slotTag(slot uint16) string {
	slotTagsOnce.Do(func() {
		filled := 0
		for n := uint64(0); filled < len(slotTags); n++ {
			tag := strconv.FormatUint(n, 36)
			if s := crc16(tag) % 16384; slotTags[s] == "" {
				slotTags[s] = tag
				filled++
			}
		}
	})
	return slotTags[slot]
}

var (
	slotTagsOnce sync.Once
	slotTags     [16384]string
)
