package redigo

import (
	"runtime"
	"testing"
)

// TestSharedString checks that sharedString's interface is the string's own: equal to any(s),
// a string to a type switch (as Redigo's writeArg sees it), alive after a GC, and made without
// an allocation.
func TestSharedString(t *testing.T) {
	keys := []string{"lock", "", "{lock}:locker:queue"}
	args := evalArgs("sha", keys, []string{"owner", "30000"})
	runtime.GC()
	want := []any{"sha", 3, "lock", "", "{lock}:locker:queue", "owner", "30000"}
	if len(args) != len(want) {
		t.Fatalf("evalArgs: %d arguments, want %d", len(args), len(want))
	}
	for i := range want {
		if args[i] != want[i] {
			t.Errorf("argument %d = %#v, want %#v", i, args[i], want[i])
		}
	}
	switch v := args[2].(type) {
	case string:
		if v != "lock" {
			t.Errorf("as a string: %q, want %q", v, "lock")
		}
	default:
		t.Errorf("argument 2 is a %T, want a string", v)
	}
	s := "key"
	if n := testing.AllocsPerRun(100, func() { _ = sharedString(&s) }); n != 0 {
		t.Errorf("sharedString: %v allocations, want 0", n)
	}
}
