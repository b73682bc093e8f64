package rediscore

import (
	"slices"
	"strings"
	"testing"
)

// Each script carries the library's definitions it uses, and only those: every definition is
// found, and every name of one that a script's text (comments left out) uses is defined in it,
// before the script's own file; renew.lua, the watchdog's, carries only the marks and what
// reads and writes shared mode.
func TestScriptsCarryTheLibraryTheyUse(t *testing.T) {
	defs := libDefs
	if want := strings.Count("\n"+libLua, "\nlocal "); len(defs) != want {
		t.Fatalf("%d definitions found in lib.lua, want %d", len(defs), want)
	}
	seen := make(map[string]bool)
	for _, d := range defs {
		if d.name == "" || seen[d.name] || !strings.HasPrefix(strings.TrimSpace(d.code), "local ") {
			t.Fatalf("definition %q: no name, a name defined twice, or not a local", d.text)
		}
		seen[d.name] = true
	}
	files := map[*Script]string{AcquireScript: acquireLua, ReleaseScript: releaseLua, RenewScript: renewLua,
		InspectScript: inspectLua, ForceScript: forceLua, RaiseScript: raiseLua, DequeueScript: dequeueLua,
		HandOffScript: handOffLua}
	for _, s := range Scripts() {
		head, tail := splitAtLib(files[s])
		lib, ok := strings.CutPrefix(s.Source, head)
		if ok {
			lib, ok = strings.CutSuffix(lib, tail)
		}
		if !ok {
			t.Fatalf("%s: the Source is not the script's file with the library at libHere", s.Name)
		}
		for _, d := range defs {
			if usesName(luaCode(tail), d.name) && !strings.Contains(lib, d.text) {
				t.Errorf("%s uses %s, which it does not carry", s.Name, d.name)
			}
			if usesName(luaCode(head), d.name) {
				t.Errorf("%s: its fast path uses %s, defined only after it", s.Name, d.name)
			}
		}
	}
	renews := []string{"MARK", "QUIET", "SHARED", "PERMITS", "limitOf", "newReaders", "readReaders", "readerValue", "writeReaders"}
	want := ""
	for _, d := range defs {
		if slices.Contains(renews, d.name) {
			want += d.text
		}
	}
	if got := RenewScript.Source; got != want+renewLua {
		t.Errorf("renew.lua carries more than %v:\n%s", renews, got)
	}
}

// usesName matches whole words only.
func TestUsesName(t *testing.T) {
	for _, c := range []struct {
		code, name string
		want       bool
	}{
		{"return free(q)", "free", true},
		{"local freed = 1", "free", false},
		{"x = unfree", "free", false},
		{"free", "free", true},
		{"a.free_b", "free", false},
		{"", "free", false},
	} {
		if got := usesName(c.code, c.name); got != c.want {
			t.Errorf("usesName(%q, %q) = %v, want %v", c.code, c.name, got, c.want)
		}
	}
}
