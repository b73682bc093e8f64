package display

import (
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	if got := Key("job:1"); got != `"job:1"` {
		t.Errorf("Key(short) = %s", got)
	}
	long := strings.Repeat("k", 1<<20)
	got := Key(long)
	if len(got) > 100 || !strings.Contains(got, "more bytes") || !strings.HasPrefix(got, `"kkkk`) {
		t.Errorf("Key(1 MiB) = %s, want it cut to about %d bytes", got, MaxKey)
	}
	// A cut never splits a UTF-8 sequence.
	if got := Key(strings.Repeat("é", 100)); strings.Contains(got, `\x`) {
		t.Errorf("Key(é×100) = %s: a rune was split", got)
	}
}

func TestOwner(t *testing.T) {
	const random = "9f86d081884c7d659a2feaa0c55ad015"
	cases := []struct{ token, want string }{
		{random, "9f86d081…"},
		{"web-1/4242#" + random, "web-1/4242#9f86d081…"},
		{"a#b#" + random, "a#b#9f86d081…"},
		{"shared-owner", "shared-owner"},
		{"#" + random, "#" + random}, // an empty label is not one the Client makes
		{"x" + random, "x" + random},
		{"evil\x1b[2J#" + random, `evil\x1b[2J#9f86d081…`},
		{strings.Repeat("o", 200), strings.Repeat("o", MaxKey) + "…"},
		{strings.ToUpper(random), strings.ToUpper(random)}, // not hex the way the Client writes it
	}
	for _, c := range cases {
		if got := Owner(c.token); got != c.want {
			t.Errorf("Owner(%q) = %q, want %q", c.token, got, c.want)
		}
	}
}
