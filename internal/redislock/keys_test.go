package redislock

import (
	"strings"
	"testing"
	"time"
)

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{
		"123456789":            0x31C3 % 16384,
		"foo":                  12182,
		"{user1000}.following": Slot("user1000"),
		"{user1000}.followers": Slot("user1000"),
		"foo{}{bar}":           Slot("foo{}{bar}"),
		"foo{{bar}}zap":        Slot("{bar"),
		"foo{bar}{zap}":        Slot("bar"),
		"":                     0,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestChannelSharesTheKeysSlot(t *testing.T) {
	for _, key := range []string{"orders:42", "{user1}:lock", "a{b", "lock{tag}rest", "ü{ä}", "a}b{c}"} {
		ch := Channel(key)
		if Slot(ch) != Slot(key) {
			t.Errorf("Channel(%q) = %q: slot %d, the key's is %d", key, ch, Slot(ch), Slot(key))
		}
		if Channel(key+"x") == ch {
			t.Errorf("keys %q and %q share a channel", key, key+"x")
		}
	}
}

// A key with a '}' but no valid hash tag hashes as a whole, and no other name can be made to
// hash to its slot: the documented exception, whose waiters rely on timers on a cluster.
func TestChannelOfAnUntaggableKey(t *testing.T) {
	for _, key := range []string{"x{}y", "{}", "a}b"} {
		if ch := Channel(key); ch != key+":locker:released" {
			t.Errorf("Channel(%q) = %q", key, ch)
		}
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{time.Nanosecond, "1"}, {time.Millisecond, "1"}, {1500 * time.Microsecond, "2"},
		{2 * time.Millisecond, "2"}, {30 * time.Second, "30000"}, {30 * time.Second, "30000"}, {0, "1"},
	} {
		if got := millis(tc.d); got != tc.want {
			t.Errorf("millis(%v) = %s, want %s", tc.d, got, tc.want)
		}
	}
}

// A lock's companion keys (request markers, fencing counter) share its slot, start with its name
// (an ACL key pattern for the locks covers them), and differ between keys and between IDs.
func TestCompanionKeys(t *testing.T) {
	keys := []string{"orders:42", "{user1}:lock", "a{b", "lock{tag}rest", "ü{ä}", "a}b{c}", "x{}y", "{}", "a}b", "}{", "job"}
	seen := make(map[string]string)
	for _, key := range keys {
		for _, c := range []string{FenceKey(key), MarkerKey(key, "r1"), MarkerKey(key, "r{2}"), MarkerKey(key, "}")} {
			if Slot(c) != Slot(key) {
				t.Errorf("companion %q of %q: slot %d, the key's is %d", c, key, Slot(c), Slot(key))
			}
			if other, dup := seen[c]; dup {
				t.Errorf("companion %q of %q is also one of %q", c, key, other)
			}
			seen[c] = key
		}
		if hashTag(key) != key || (!strings.ContainsAny(key, "{}")) {
			if c := FenceKey(key); !strings.HasPrefix(c, key) {
				t.Errorf("FenceKey(%q) = %q does not start with the key", key, c)
			}
		}
	}
	if got := MarkerKey("job", "r1"); got != "job{job}:locker:req:r1" {
		t.Errorf("MarkerKey(job, r1) = %q", got)
	}
	if got := FenceKey("{user1}:lock"); got != "{user1}:lock:locker:fence" {
		t.Errorf("FenceKey({user1}:lock) = %q", got)
	}
}

// slotTag finds a tag for every slot.
func TestSlotTag(t *testing.T) {
	for slot := range uint16(16384) {
		if tag := slotTag(slot); Slot("{"+tag+"}") != slot {
			t.Fatalf("slotTag(%d) = %q, whose slot is %d", slot, tag, Slot("{"+tag+"}"))
		}
	}
}
