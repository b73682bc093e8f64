package quorum

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrNodeSet means that a node holds the key for a quorum configured with other nodes than this
// Backend's: another node count, other Config.Names, the same nodes in another order (without
// Names), a client of that node alone — or this Backend names one server twice. Two such
// quorums could both hold a key (each on a majority of its own nodes), so Acquire refuses: it
// takes back what it took and returns an error wrapping ErrNodeSet that says which node and
// what differs. It is a configuration error: retrying does not help, and Lock returns it at once.
// Test with errors.Is.
var ErrNodeSet = errors.New("quorum: the node set differs from the one the lock was taken with")

// markPrefix starts the owner token that a node receives: "quorum:<count>:<tag>:<fingerprint>#"
// then the caller's owner token. The '#' keeps the caller's label and random part where
// display.Owner looks for them, so an operator inspecting one node sees the token shortened.
const markPrefix = "quorum:"

// fingerprintLen is the length of a configuration's fingerprint in hex digits (48 bits).
const fingerprintLen = 12

// mark is what a node's owner token says about the quorum that took the hold.
type mark struct {
	count int    // the quorum's number of nodes
	tag   int    // the node's tag in that quorum: its rank by name, or its position
	fp    string // the fingerprint of the quorum's configuration
}

// fingerprint identifies a configuration of count nodes named names (none: by position only):
// the first 48 bits of a SHA-256 of the count and the sorted names, each with its length. The
// same set of names in any order gives the same fingerprint, in every process and version.
func fingerprint(count int, names []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "locker/quorum/v1\n%d\n", count)
	for _, name := range slices.Sorted(slices.Values(names)) {
		fmt.Fprintf(h, "%d:%s\n", len(name), name)
	}
	return hex.EncodeToString(h.Sum(nil))[:fingerprintLen]
}

// tags returns each node's tag: with names, the rank of its name among the sorted names (so
// that the order in which a client lists the nodes does not matter); without, its position.
func tags(count int, names []string) []int {
	t := make([]int, count)
	sorted := slices.Sorted(slices.Values(names))
	for i := range t {
		t[i] = i
		if len(names) == count {
			t[i], _ = slices.BinarySearch(sorted, names[i])
		}
	}
	return t
}

// marks returns the prefix of the owner tokens sent to each node.
func marks(fp string, tags []int) []string {
	m := make([]string, len(tags))
	for i, tag := range tags {
		m[i] = markPrefix + strconv.Itoa(len(tags)) + ":" + strconv.Itoa(tag) + ":" + fp + "#"
	}
	return m
}

// parseMark splits a node's owner token into the caller's owner token and the quorum's mark; ok
// is false for a token that no quorum made.
func parseMark(token string) (owner string, m mark, ok bool) {
	rest, found := strings.CutPrefix(token, markPrefix)
	if !found {
		return "", mark{}, false
	}
	head, owner, found := strings.Cut(rest, "#")
	fields := strings.Split(head, ":")
	if !found || len(fields) != 3 || len(fields[2]) != fingerprintLen {
		return "", mark{}, false
	}
	count, err1 := strconv.Atoi(fields[0])
	tag, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil {
		return "", mark{}, false
	}
	return owner, mark{count: count, tag: tag, fp: fields[2]}, true
}

// stripMark returns the caller's owner token of a node's token; a token that no quorum made is
// returned as it is.
func stripMark(token string) string {
	if owner, _, ok := parseMark(token); ok {
		return owner
	}
	return token
}

// nodeOwner is the owner token node i receives for owner.
func (b *Backend) nodeOwner(i int, owner string) string { return b.marks[i] + owner }

// nodeID is the request ID node i receives for id: each node's is its own, as if each node were
// its own server. Two names of one server must not share a request marker: a release that finds
// its ID's marker reports the first call's outcome, whichever owner made it, so the second name's
// release would count as done.
func (b *Backend) nodeID(i int, id string) string {
	if id == "" {
		return ""
	}
	return id + ":q" + strconv.Itoa(b.tags[i])
}

// nodeName names node i in messages: its Config.Names entry, or its position.
func (b *Backend) nodeName(i int) string {
	if len(b.names) > 0 {
		return fmt.Sprintf("node %d (%q)", i, b.names[i])
	}
	return fmt.Sprintf("node %d", i)
}
