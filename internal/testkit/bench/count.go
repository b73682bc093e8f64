package bench

import (
	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/callcount"
)

// Calls counts the calls of each locker.Locker method; every call is one round trip to a
// network backend (Renew sends its whole batch in one pipeline).
type Calls = callcount.Calls

// A Counter is a locker.Locker that counts the calls to the Locker it wraps.
type Counter = callcount.Counter

// Count returns a Counter around l.
func Count(l locker.Locker) *Counter { return callcount.Count(l) }
