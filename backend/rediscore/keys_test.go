package rediscore

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
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

// trickyKeys are lock keys whose companions are hard to name: plain, tagged, stray braces, an
// empty tag, binary bytes, keys that look like companions, and long keys around maxWholeKey.
func trickyKeys() []string {
	long := strings.Repeat("k", 64<<10)
	keys := []string{
		"job", "job{job}", "q", "{q}", "orders:42", "{user1}:lock", "lock{tag}rest", "ü{ä}",
		"x{}y", "a{b", "}x", "{", "}", "{}", "}{", "a}b", "a}b{c}", "{}{t}", "",
		"\x00\xff{\xfe", "\r\n{x}", "inv", "inv{inv}:locker:fence", "job:locker:fence",
		"a", "a:locker:req:b", "app:x{}y", "app:a{b", "app:}x",
		long, "{t}" + long, long + "{t}", "{" + long, strings.Repeat("k", 63) + "{" + long + "}",
		strings.Repeat("x", maxWholeKey), strings.Repeat("x", maxWholeKey+1),
		strings.Repeat("{", maxWholeKey+1), strings.Repeat("x", keptKey) + "~" + strings.Repeat("0", 32),
	}
	for _, k := range keys[:len(keys):len(keys)] {
		keys = append(keys, "app:"+k)
	}
	return keys
}

// trickyIDs are request IDs: the Client's form, and IDs a marker's name cannot hold as they are.
var trickyIDs = []string{
	"AAAAAAAAAAAAAAAA.1", "r1", "", "r{2}", "}", "{", "b:locker:fence", "~", "x~abc",
	strings.Repeat("i", maxWholeID), strings.Repeat("i", maxWholeID+1), "\x00", "ä",
}

// companions returns every companion of key with the tricky IDs, by role.
func companions(key string) map[string]string {
	m := map[string]string{"fence": FenceKey(key), "queue": QueueKey(key), "channel": Channel(key)}
	for _, id := range trickyIDs {
		m["marker "+id] = MarkerKey(key, id)
	}
	return m
}

// checkCompanions checks that every companion of key starts with the key (or a long key's first
// keptKey bytes), hashes to its slot and is short, and that no name in seen is also one of
// another key's or role's.
func checkCompanions(t interface {
	Helper()
	Fatalf(string, ...any)
}, key string, seen map[string]string) {
	t.Helper()
	prefix := key
	if len(key) > maxWholeKey {
		prefix = key[:keptKey] + "~"
	}
	for role, c := range companions(key) {
		if !strings.HasPrefix(c, prefix) {
			t.Fatalf("%s of %.40q = %.120q does not start with %.40q", role, key, c, prefix)
		}
		if Slot(c) != Slot(key) {
			t.Fatalf("%s of %.40q = %.120q: slot %d, the key's is %d", role, key, c, Slot(c), Slot(key))
		}
		if len(c) > 200 {
			t.Fatalf("%s of %.40q = %.120q: %d bytes, want at most 200", role, key, c, len(c))
		}
		// A channel and a key may share a name (pub/sub has names of its own), not two keys or
		// two channels.
		kind := "key "
		if role == "channel" {
			kind = "channel "
		}
		if other, dup := seen[kind+c]; dup && other != role+" of "+key {
			t.Fatalf("%s of %.40q = %.120q is also the %.80s", role, key, c, other)
		}
		seen[kind+c] = role + " of " + key
	}
}

// Every companion starts with its key, shares its slot, stays short, and belongs to one key and
// role only: also for stray braces, long keys, and keys named like another key's companions.
func TestCompanionNames(t *testing.T) {
	seen := make(map[string]string)
	for _, key := range trickyKeys() {
		checkCompanions(t, key, seen)
	}
	for _, pair := range [][2]string{
		{FenceKey("job"), FenceKey("job{job}")},
		{Channel("q"), Channel("{q}")},
		{FenceKey("a:locker:req:b"), MarkerKey("a", "b:locker:fence")},
	} {
		if pair[0] == pair[1] {
			t.Errorf("two keys share the companion %q", pair[0])
		}
	}
	for _, c := range [][2]string{
		{FenceKey("{user1}:lock"), "{user1}:lock:locker:fence"},
		{QueueKey("{user1}:lock"), "{user1}:lock:locker:queue"},
		{QueueKey("job"), "job:locker:queue{" + slotTag(Slot("job")) + "}"},
		{MarkerKey("job", "r1"), "job:locker:req:r1{" + slotTag(Slot("job")) + "}"},
		{Channel("}x"), "}x:locker:released{" + slotTag(Slot("}x")) + "}"},
		{FenceKey("x{}y")[:len("x{}y:locker:fence~")], "x{}y:locker:fence~"},
	} {
		if c[0] != c[1] {
			t.Errorf("companion %q, want %q", c[0], c[1])
		}
	}
	// An ID's braces do not reach the name: only the tag that Z adds.
	if m := MarkerKey("k", "r{2}"); strings.Count(m, "{") != 1 || strings.Count(m, "}") != 1 || !strings.HasSuffix(m, "}") {
		t.Errorf("MarkerKey(k, r{2}) = %q", m)
	}
}

// Random keys, biased towards braces, colons and ":locker:", and their companions: as in
// TestCompanionNames, across every key of a run.
func TestCompanionNamesRandom(t *testing.T) {
	seen := make(map[string]string)
	piece := rapid.SampledFrom([]string{"{", "}", ":", "~", ":locker:", "fence", "req:", "released", "a", "b", "app:", "\x00", "\xff"})
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(piece, 0, 12).Draw(t, "parts")
		key := strings.Join(parts, "")
		if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
			key += strings.Repeat("x", rapid.IntRange(maxWholeKey-len(key), 300).Draw(t, "pad"))
		}
		checkCompanions(t, key, seen)
	})
}

// slotSuffix has 3 characters for every slot, and they put a name without a valid tag in it.
func TestSlotSuffix(t *testing.T) {
	for slot := range uint16(16384) {
		for _, a := range []string{"x{}y:locker:fence~", "a{b:locker:req:r1~", ""} {
			x := slotSuffix(a, slot)
			if len(x) != 3 || !isAlnum(x[0]) || !isAlnum(x[1]) || !isAlnum(x[2]) {
				t.Fatalf("slotSuffix(%q, %d) = %q, want 3 letters or digits", a, slot, x)
			}
			if got := Slot(a + x); got != slot {
				t.Fatalf("slotSuffix(%q, %d) = %q, whose name's slot is %d", a, slot, x, got)
			}
		}
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

// releaseNames names what MarkerKey, Channel, QueueKey and FenceKey name, whatever the key and
// the ID.
func TestReleaseNames(t *testing.T) {
	long := strings.Repeat("k", 200)
	for _, key := range []string{"job", "{user}:7", "a{b", "x{}y", "}x", long, long + "{t}", "{t}" + long} {
		for _, id := range []string{"abc.1", "", "with space", strings.Repeat("i", 100)} {
			m, c, q, f := releaseNames(key, id)
			if q != QueueKey(key) || f != FenceKey(key) {
				t.Errorf("releaseNames(%q, %q): queue %q, fence %q; want %q, %q", key, id, q, f, QueueKey(key), FenceKey(key))
			}
			wantM := MarkerKey(key, id)
			if id == "" {
				wantM = ""
			}
			if m != wantM || c != Channel(key) {
				t.Errorf("releaseNames(%q, %q) = %q, %q; want %q, %q", key, id, m, c, wantM, Channel(key))
			}
		}
	}
}

// companionNames names what MarkerKey, QueueKey, FenceKey and Channel name, for any subset of
// them, whatever the key and the ID.
func TestCompanionNamesAtOnce(t *testing.T) {
	long := strings.Repeat("k", 200)
	for _, key := range []string{"job", "{user}:7", "a{b", "x{}y", "}x", long, long + "{t}", "{t}" + long} {
		for _, id := range []string{"abc.1", "with space", strings.Repeat("i", 100)} {
			all := [4]string{"req:", "queue", "fence", "released"}
			want := [4]string{MarkerKey(key, id), QueueKey(key), FenceKey(key), Channel(key)}
			for set := range 16 {
				var suffixes, expect [4]string
				for i := range 4 {
					if set&(1<<i) != 0 {
						suffixes[i], expect[i] = all[i], want[i]
					}
				}
				var got [4]string
				companionNames(key, suffixes, [4]string{id}, &got)
				if got != expect {
					t.Errorf("companionNames(%q, %q, %q) = %q, want %q", key, suffixes, id, got, expect)
				}
			}
		}
	}
}
