package quorum_test

import (
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
	"github.com/hashlock/locker/conformance"
)

// The suite on a quorum of three memory backends, in a synctest bubble.
func TestConformanceMemory(t *testing.T) {
	conformance.Run(t, conformance.Factory{
		New: func(conformance.TB) locker.Locker {
			return quorum.New(memory.New(), memory.New(), memory.New())
		},
		Synctest: true,
	})
}
