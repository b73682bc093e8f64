// Package notify holds what every backend's release notices share: a subscription that is
// either plain (locker.Locker.Subscribe) or an owner's (locker.Granter.SubscribeAs), and how a
// notice reaches it without blocking.
package notify

// A Waiter is one subscription to the release notices of a key. Its sender must serialise
// Notify calls (the backends hold their lock).
type Waiter struct {
	Plain   chan struct{} // a plain subscription's notices; nil for an owner's
	Granted chan string   // an owner's: "" for a notice that grants nothing, else a grant's ID
	Owner   string        // the owner of a Granted subscription
}

// NewPlain returns a plain Waiter.
func NewPlain() *Waiter { return &Waiter{Plain: make(chan struct{}, 1)} }

// NewOwner returns the Waiter of owner.
func NewOwner(owner string) *Waiter { return &Waiter{Granted: make(chan string, 1), Owner: owner} }

// Notify sends w the notice of a release that granted the key to grantee with request ID id
// ("", "": one that granted nothing), without blocking. A plain Waiter gets every notice; an
// owner's gets those that grant nothing and the grants to its owner. A notice pending absorbs
// one that grants nothing, and a grant replaces a notice pending: the latest grant counts.
func (w *Waiter) Notify(grantee, id string) {
	if w.Plain != nil {
		select {
		case w.Plain <- struct{}{}:
		default:
		}
		return
	}
	if grantee != "" && grantee != w.Owner {
		return
	}
	if grantee == "" {
		id = ""
	}
	for {
		select {
		case w.Granted <- id:
			return
		default:
		}
		if id == "" {
			return // one is pending
		}
		select {
		case <-w.Granted:
		default:
		}
	}
}
