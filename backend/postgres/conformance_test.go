package postgres_test

import (
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/conformance"
)

// The full suite on a real PostgreSQL, in real time.
func TestConformance(t *testing.T) {
	t.Parallel()
	pool, opts := migrated(t)
	conformance.Run(t, conformance.Factory{
		New: func(t conformance.TB) locker.Locker {
			b := postgres.New(pool, opts...)
			t.Cleanup(b.Close)
			return b
		},
	})
}
