package locker

import (
	"regexp"
	"testing"
)

// idSource.start makes an owner token (after its label) only when asked, and two request IDs
// that no other call of the source repeats; next never repeats them either.
func TestIDSourceStart(t *testing.T) {
	s := newIDSource()
	seen := map[string]bool{}
	unique := func(id string) {
		t.Helper()
		if id == "" || seen[id] {
			t.Fatalf("request ID %q is empty or repeated", id)
		}
		seen[id] = true
	}
	token := regexp.MustCompile(`^(web-1#)?[0-9a-f]{32}$`)
	for i := range 100 {
		label := ""
		if i%2 == 1 {
			label = "web-1"
		}
		owner, acquire, release := s.start(label, i%3 != 0)
		if i%3 == 0 && owner != "" {
			t.Fatalf("start made owner %q when not asked to", owner)
		}
		if i%3 != 0 && (!token.MatchString(owner) || (label != "") != (owner[0] == 'w')) {
			t.Fatalf("start(%q) made owner %q", label, owner)
		}
		unique(acquire)
		unique(release)
		unique(s.next())
		if tok := newOwnerToken(label); !token.MatchString(tok) {
			t.Fatalf("newOwnerToken(%q) = %q", label, tok)
		}
	}
}
