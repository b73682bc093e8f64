package memory_test

import (
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Factory{
		New:      func(conformance.TB) locker.Locker { return memory.New() },
		Synctest: true,
	})
}

// The same suite in real time: what a network backend meets, minus the network.
func TestConformanceRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time conformance takes seconds; run without -short")
	}
	conformance.Run(t, conformance.Factory{
		New: func(conformance.TB) locker.Locker { return memory.New() },
	})
}
