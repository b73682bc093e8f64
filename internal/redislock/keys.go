package redislock

import "strings"

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
func Slot(key string) uint16 {
	var crc uint16
	for _, b := range []byte(hashTag(key)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
