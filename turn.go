package locker

import (
	"time"
)

// A turn queues the Lock calls of one Client on one key locally. Its token goes to one call at a
// time: that call alone tries the backend, waits for notices, and keeps the token while it
// holds the lock; Unlock (or the lease's loss) hands it to the next call in line, which tries at
// once. The others wait on the channel, in arrival order, without a round trip. A turn exists
// only while some call waits or holds through it: an uncontended Lock never makes one.
type turn struct {
	token chan struct{} // holds the token while no call has it
	users int           // calls that hold or wait for the token; guarded by turnSet.mu

	// Local hand-offs (below), guarded by turnSet.mu: the gift offered with the token,
	// the hand-offs made in a row, and whether the next Unlock must release (others wait).
	gift  *gift
	gifts int
	yield bool

	// offer, in a line of permits (permits.go), is where an Unlock hands a permit to a waiting
	// call that is ready for it; nil in a lock's turn.
	offer chan *gift
}

// Local hand-offs. When a Lease that holds its key's local turn (see turn) is unlocked while
// other Lock calls of the same Client wait in that turn, on a backend that is a HandOffer, Unlock
// hands the key to the next of them instead of releasing it: that call claims the hand-off and
// returns its Lease at once, while Unlock sends one HandOff (old owner out, new owner in), the
// key staying held on the backend throughout. Until the HandOff is confirmed, the new Lease's
// hold keeps the old hold's validity (so its context ends before the old lease may have expired
// on the backend), is not renewed, and a re-entry or Unlock of it waits for the confirmation.
// When the HandOff reports others waiting in the backend's queue (other Clients, readers), the
// turn's next Unlock releases instead, so that they get the chance they get without hand-offs.

// maxHandOffs bounds the hand-offs in a row on one turn, whatever the backend reports.
const maxHandOffs = 64

// A gift is a hand-off offered by an Unlock to the next Lock call in its turn.
type gift struct {
	from       string        // the giver's owner token
	validUntil time.Time     // the giver's validity: the taker's until the HandOff is confirmed
	ready      chan struct{} // closed once claimed (to set), declined or dropped
	done       chan struct{} // closed once the giver's backend call is over

	// Set by the taker before ready is closed.
	to   string        // the taker's owner token; "" when declined or dropped
	ttl  time.Duration // the taker's TTL
	turn *turn         // the turn it was offered in
}
