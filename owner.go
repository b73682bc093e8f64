package locker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
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
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go ≥ 1.24).
	if label == "" {
		return hex.EncodeToString(b[:])
	}
	buf := make([]byte, 0, len(label)+1+2*len(b))
	buf = append(append(buf, label...), display.LabelSep)
	return string(hex.AppendEncode(buf, b[:]))
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
