package locker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashlock/locker/internal/display"
)

// ownershipKey is the context key under which a Lease's context carries its ownership.
type ownershipKey struct{}

// carrierOf returns the innermost lease whose context ctx is or derives from that holds key (the
// full key, prefix included), or nil. Every lease context adds one link to the chain of its
// parent context, so a context derived from several leases carries the ownership of all of them.
func carrierOf(ctx context.Context, key string) *Lease {
	l, _ := ctx.Value(ownershipKey{}).(*Lease)
	for ; l != nil; l = l.outer {
		if l.fullKey == key {
			return l
		}
	}
	return nil
}

// outerLease returns the innermost lease that ctx carries, or nil.
func outerLease(ctx context.Context) *Lease {
	l, _ := ctx.Value(ownershipKey{}).(*Lease)
	return l
}

// newOwnerToken returns a fresh owner token: 128 random bits, hex-encoded, after label and '#'
// when label is not empty (see WithOwnerLabel).
func newOwnerToken(label string) string {
	var b strings.Builder
	b.Grow(ownerTokenLen(label))
	appendOwnerToken(&b, label)
	return b.String()
}

// ownerTokenLen is the length of an owner token after label.
func ownerTokenLen(label string) int {
	if label == "" {
		return 2 * ownerTokenBytes
	}
	return len(label) + 1 + 2*ownerTokenBytes
}

// ownerTokenBytes is how many random bytes an owner token has.
const ownerTokenBytes = 16

// appendOwnerToken writes a fresh owner token after label to b.
func appendOwnerToken(b *strings.Builder, label string) {
	var random [ownerTokenBytes]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read never returns an error (Go ≥ 1.24).
	if label != "" {
		b.WriteString(label)
		b.WriteByte(display.LabelSep)
	}
	var h [2 * ownerTokenBytes]byte
	hex.Encode(h[:], random[:])
	b.Write(h[:])
}

// idSource makes request IDs: a random 96-bit prefix per Client and a counter, so IDs never
// repeat across Clients and processes (see AcquireRequest.ID).
type idSource struct {
	prefix string
	n      atomic.Uint64
}

func newIDSource() idSource {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return idSource{prefix: base64.RawURLEncoding.EncodeToString(b[:]) + "."}
}

// next returns a fresh request ID, in one allocation.
func (s *idSource) next() string {
	var buf [48]byte
	b := append(buf[:0], s.prefix...)
	return string(strconv.AppendUint(b, s.n.Add(1), 36))
}

// start returns what a Lock call needs at its start, in one allocation: the request ID of its
// first acquire, the request ID of the release of its lease, and, when fresh, a new owner token
// (as newOwnerToken makes it, after label).
func (s *idSource) start(label string, fresh bool) (owner, acquire, release string) {
	n := s.n.Add(2)
	var b strings.Builder
	size := 2 * (len(s.prefix) + 13) // 13: the most base-36 digits of a uint64
	if fresh {
		size += ownerTokenLen(label)
	}
	b.Grow(size)
	if fresh {
		appendOwnerToken(&b, label)
	}
	o := b.Len()
	var digits [16]byte
	b.WriteString(s.prefix)
	b.Write(strconv.AppendUint(digits[:0], n-1, 36))
	a := b.Len()
	b.WriteString(s.prefix)
	b.Write(strconv.AppendUint(digits[:0], n, 36))
	all := b.String()
	return all[:o], all[o:a], all[a:]
}
