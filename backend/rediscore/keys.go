package rediscore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A lock key K has companions: its fencing counter (FenceKey), the markers of its requests
// (MarkerKey), its wait queue (QueueKey) and its release-notice channel (Channel). Each is named
//
//	P + ":locker:" + suffix + Z
//
// so that
//   - it starts with K (or, for a key longer than maxWholeKey bytes, with its first keptKey
//     bytes), and an ACL key or channel pattern for the locks ("~app:*", "&app:*") covers it;
//   - it hashes to K's cluster slot, so that one script can touch the lock and its companions
//     and SPUBLISH to its channel;
//   - it stays short whatever the key (at most about 190 bytes);
//   - no two (key, companion) pairs share a name: the name can be read back, because neither
//     suffix nor Z ever contains ":locker:", so the name's last ":locker:" ends P.
//
// P is K itself up to maxWholeKey bytes, else K's first keptKey bytes, "~" and the hex of the
// first 16 bytes of its SHA-256 (97 bytes, so never a short key). The suffix is "fence", "queue",
// "released" or "req:" + the request ID, the ID written as "~" and the hex of a digest unless
// it is up to maxWholeID bytes of [A-Za-z0-9._-] (the Client's IDs are), so that a suffix never
// holds braces or a colon. Z puts the name in K's slot:
//   - nothing when the name has a hash tag: it is K's ("{user}:7" gives "{user}:7:locker:fence");
//   - "{" + a tag of K's slot + "}" when the name has no '{' ("job" gives
//     "job:locker:fence{<tag>}", "}x" gives "}x:locker:fence{<tag>}");
//   - otherwise (a '{' but no valid tag, as in "a{b" or "x{}y": Redis hashes the whole name)
//     "~" + 3 alphanumeric characters chosen so that the whole name hashes to K's slot.
//
// A user's key may still be named like a companion: the scripts check every companion before
// they write anything, and refuse with NOTALOCK one that holds something they did not write
// (lua/lib.lua).
const (
	maxWholeKey = 96 // the longest key a companion's name keeps whole
	keptKey     = 64 // how much of a longer key it keeps
	maxWholeID  = 64 // the longest request ID a marker's name keeps whole
	digestBytes = 16 // how much of a SHA-256 names a long key or an unusual ID
)

// FenceKey returns the name of the fencing counter of the lock key.
func FenceKey(key string) string { return companion(key, "fence", "") }

// QueueKey returns the name of the wait queue of the lock key: a hash of waiting owners, for
// shared holds and fair locks (its layout is in lua/lib.lua). It exists only while a request
// waits, and vanishes by itself when the last one's wait ends.
func QueueKey(key string) string { return companion(key, "queue", "") }

// MarkerKey returns the name of the marker of request id on the lock key.
func MarkerKey(key, id string) string { return companion(key, "req:", id) }

// Channel returns the release-notice channel of the lock key. Like every companion, it hashes
// to the key's cluster slot, so a script can SPUBLISH to it.
func Channel(key string) string { return companion(key, "released", "") }

// releaseNames returns what a release sends besides the key: MarkerKey(key, id) ("" when id is
// ""), Channel(key), QueueKey(key) and FenceKey(key), in one allocation.
func releaseNames(key, id string) (marker, channel, queue, fence string) {
	suffixes := [4]string{"", "released", "queue", "fence"}
	if id != "" {
		suffixes[0] = "req:"
	}
	var names [4]string
	companionNames(key, suffixes, [4]string{id}, &names)
	return names[0], names[1], names[2], names[3]
}

// companionNames names several companions of key in one allocation: names[i] gets the companion of
// key with suffixes[i] and ids[i] (as companion does) for every suffix that is not "". It is for
// the hot path, where a call needs its marker, queue and channel names at once.
func companionNames(key string, suffixes, ids [4]string, names *[4]string) {
	n := 0
	for i, suffix := range suffixes {
		if suffix != "" {
			n += companionLen(key, suffix, ids[i])
		}
	}
	var b strings.Builder
	b.Grow(n)
	var ends [4]int
	for i, suffix := range suffixes {
		if suffix != "" {
			appendCompanion(&b, key, suffix, ids[i])
		}
		ends[i] = b.Len()
	}
	s, start := b.String(), 0
	for i, suffix := range suffixes {
		if suffix != "" {
			names[i] = s[start:ends[i]]
		}
		start = ends[i]
	}
}

// companion returns the name P + ":locker:" + suffix + the id's part + Z described above.
func companion(key, suffix, id string) string {
	var b strings.Builder
	b.Grow(companionLen(key, suffix, id))
	appendCompanion(&b, key, suffix, id)
	return b.String()
}

// companionLen bounds the length of companion's name.
func companionLen(key, suffix, id string) int {
	return min(len(key), maxWholeKey+1) + len(":locker:") + len(suffix) + min(len(id), 2*digestBytes+1) + 8
}

// appendCompanion writes companion's name to b, after what b holds.
func appendCompanion(b *strings.Builder, key, suffix, id string) {
	start := b.Len()
	if len(key) <= maxWholeKey {
		b.WriteString(key)
	} else {
		b.WriteString(key[:keptKey])
		writeDigest(b, key)
	}
	b.WriteString(":locker:")
	b.WriteString(suffix)
	if plainID(id) {
		b.WriteString(id)
	} else {
		writeDigest(b, id)
	}
	name := b.String()[start:] // b only grows: name stays valid
	slot := Slot(key)
	switch {
	case strings.IndexByte(name, '{') < 0:
		b.WriteByte('{')
		b.WriteString(slotTag(slot))
		b.WriteByte('}')
	case hashTag(name) != name:
		// The name's first '{' is in P and none of what follows it holds a '}': the name has a
		// tag only if P, and so K, has that tag (a long key's tag too, if P kept it whole).
	default:
		b.WriteByte('~')
		b.WriteString(slotSuffix(b.String()[start:], slot))
	}
}

// writeDigest writes "~" and the hex of the first digestBytes bytes of s's SHA-256.
func writeDigest(b *strings.Builder, s string) {
	sum := sha256.Sum256([]byte(s))
	var h [2 * digestBytes]byte
	hex.Encode(h[:], sum[:digestBytes])
	b.WriteByte('~')
	b.Write(h[:])
}

// plainID reports whether a marker's name may hold id as it is: up to maxWholeID bytes of
// [A-Za-z0-9._-].
func plainID(id string) bool {
	if len(id) > maxWholeID {
		return false
	}
	for i := range len(id) {
		if c := id[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

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

// Slot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag, modulo 16384.
func Slot(key string) uint16 { return crc16(0, hashTag(key)) % 16384 }

// crc16 continues CRC16/XMODEM, the checksum of Redis Cluster's key slots, from crc over s.
func crc16(crc uint16, s string) uint16 {
	for i := range len(s) {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable is CRC16/XMODEM (polynomial 0x1021) of every byte.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// slotTag returns a short string whose slot is slot: the smallest number, in base 36, that
// hashes to it. The table is built on first use (about 160,000 hashes).
func slotTag(slot uint16) string {
	slotTagsOnce.Do(func() {
		filled := 0
		var buf [16]byte
		for n := uint64(0); filled < len(slotTags); n++ {
			tag := strconv.AppendUint(buf[:0], n, 36)
			if s := crc16(0, string(tag)) % 16384; slotTags[s] == "" {
				slotTags[s] = string(tag)
				filled++
			}
		}
	})
	return slotTags[slot]
}

// slotSuffix returns 3 alphanumeric characters X such that the whole of a+X hashes to slot. CRC16
// with a zero start and no final xor is linear: crc(a+X) = crc(a+"\x00\x00\x00") ^ crc(X), so X
// is the entry of the wanted low 14 bits of crc(X) in a table built on first use (of the
// 238,328 three-character strings, the first for each value; every value has one).
func slotSuffix(a string, slot uint16) string {
	slotSuffixesOnce.Do(func() {
		const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		for _, x := range []byte(alnum) {
			for _, y := range []byte(alnum) {
				for _, z := range []byte(alnum) {
					s := string([]byte{x, y, z})
					if v := crc16(0, s) & 0x3FFF; slotSuffixes[v] == "" {
						slotSuffixes[v] = s
					}
				}
			}
		}
	})
	return slotSuffixes[(crc16(crc16(0, a), "\x00\x00\x00")^slot)&0x3FFF]
}

var (
	slotTagsOnce     sync.Once
	slotTags         [16384]string
	slotSuffixesOnce sync.Once
	slotSuffixes     [16384]string
)

// A flagSet is the scripts' flags argument for every combination of its letters, made once, so
// that no call builds a string.
type flagSet []string

// newFlagSet returns the flag set of letters (a few: it has 2^len(letters) entries).
func newFlagSet(letters string) flagSet {
	s := make(flagSet, 1<<len(letters))
	for i := range s {
		for j := range len(letters) {
			if i&(1<<j) != 0 {
				s[i] += letters[j : j+1]
			}
		}
	}
	return s
}

// of returns the letters whose condition holds, in the order of the set's letters.
func (s flagSet) of(conds ...bool) string {
	i := 0
	for j, c := range conds {
		if c {
			i |= 1 << j
		}
	}
	return s[i]
}

// millis formats d in whole milliseconds, rounded up, at least 1. Most programs use one or two
// TTLs, so the latest result is kept: the hot path formats nothing.
func millis(d time.Duration) string { return formatMillis(d, &lastMillis) }

// formatMillis is millis with the latest result kept in last (one for TTLs, one for waits, one
// for reply windows, so that none pushes the others out: the Client's windows are whole
// milliseconds, mostly its WithUnlockTimeout).
func formatMillis(d time.Duration, last *atomic.Pointer[formatted]) string {
	if l := last.Load(); l != nil && l.d == d {
		return l.s
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	s := strconv.FormatInt(int64(max(ms, 1)), 10)
	last.Store(&formatted{d, s})
	return s
}

// formatted is a TTL and its formatting by millis.
type formatted struct {
	d time.Duration
	s string
}

var lastMillis, lastWait, lastGrant, lastWindow atomic.Pointer[formatted]
