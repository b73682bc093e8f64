package quorum

import (
	"strings"
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/internal/display"
)

// A node's token gives back the caller's owner token and the configuration; the same names in
// any order give the same fingerprint and tags by name; tokens no quorum made are left whole.
func TestMarks(t *testing.T) {
	const random = "9f86d081884c7d659a2feaa0c55ad015"
	b := NewConfig(Config{Nodes: []locker.Locker{memory.New(), memory.New(), memory.New()}, Names: []string{"b:1", "a:1", "c:1"}})
	same := NewConfig(Config{Nodes: []locker.Locker{memory.New(), memory.New(), memory.New()}, Names: []string{"c:1", "b:1", "a:1"}})
	if b.fp != same.fp || b.tags[0] != same.tags[1] || b.tags[1] != 0 {
		t.Fatalf("fingerprints %s, %s and tags %v, %v: want one fingerprint, tags by name", b.fp, same.fp, b.tags, same.tags)
	}
	if plain := New(memory.New(), memory.New(), memory.New()); plain.fp == b.fp || plain.tags[2] != 2 {
		t.Fatalf("without names: fingerprint %s, tags %v", plain.fp, plain.tags)
	}
	for _, owner := range []string{random, "web-1/42#" + random, "shared#owner#x", "quorum:3:0:000000000000#x"} {
		token := b.nodeOwner(2, owner)
		got, m, ok := parseMark(token)
		if !ok || got != owner || m != (mark{count: 3, tag: 2, fp: b.fp}) {
			t.Errorf("parseMark(%q) = %q, %+v, %v", token, got, m, ok)
		}
		if strings.Contains(owner, random) && strings.Contains(display.Owner(token), random) {
			t.Errorf("display.Owner(%q) = %q shows the random part", token, display.Owner(token))
		}
	}
	if id0, id1 := b.nodeID(0, "r.1"), b.nodeID(1, "r.1"); id0 == id1 || id0 != b.nodeID(0, "r.1") || b.nodeID(0, "") != "" {
		t.Errorf("request IDs of nodes 0 and 1: %q, %q; want distinct, stable, and none for none", id0, id1)
	}
	for _, token := range []string{random, "quorum:", "quorum:3:1#x", "quorum:3:x:000000000000#x", "quorum:3:1:0000#x", "quorum:3:1:000000000000"} {
		if _, _, ok := parseMark(token); ok || stripMark(token) != token {
			t.Errorf("parseMark(%q) accepted a token no quorum made", token)
		}
	}
}
