package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
	"github.com/hashlock/locker/internal/notify"
)

// Release notices: every release to zero, forced release and grant runs pg_notify on the
// Backend's one channel with sha256(key), and for a grant sha256(grantee) and the request ID (see
// schema.sql, locker_notify). A hub LISTENs on one connection of its own, made with the pool's
// configuration (or WithNoticeConnConfig's) but outside the pool (so that it never takes a connection the lock's calls wait for),
// whatever the number of keys waited on, and hands each notice to the subscriptions of its key.
// It connects at the first subscription and closes the connection once the last has ended and
// the linger has passed; when the connection breaks, it connects again and listens again, then
// sends every subscription a notice (one may have been missed).

// relistenWait bounds the pause between attempts to listen again.
const relistenWait = 200 * time.Millisecond

// hub is a Backend's notice listener.
type hub struct {
	cfg     *pgx.ConnConfig
	channel string
	linger  time.Duration

	mu     sync.Mutex
	subs   map[string]map[*notify.Waiter]string // sha256(key) -> subscription -> sha256(owner) ("" plain)
	n      int                                  // subscriptions
	gen    *attempt                             // the current attempt to listen; nil when stopped
	stop   context.CancelFunc                   // ends the listener; nil when stopped
	done   chan struct{}                        // closed when the listener has returned
	idle   *time.Timer                          // the linger after the last subscription
	closed bool
}

// attempt is one connection's listening: ready is closed once it listens, failed (with err) when
// it could not.
type attempt struct {
	ready, failed chan struct{}
	err           error
}

func newAttempt() *attempt { return &attempt{ready: make(chan struct{}), failed: make(chan struct{})} }

func newHub(cfg *pgx.ConnConfig, channel string, linger time.Duration) *hub {
	return &hub{cfg: cfg, channel: channel, linger: linger, subs: map[string]map[*notify.Waiter]string{}}
}

// Subscribe implements [locker.Locker.Subscribe] over the Backend's notice connection: it returns
// once that connection listens. Without notices (WithoutNotices) it returns an error wrapping
// errors.ErrUnsupported.
func (b *Backend) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	w := notify.NewPlain()
	cancel, err := b.join(ctx, key, w, "")
	return w.Plain, cancel, err
}

// SubscribeAs implements [locker.Granter.SubscribeAs]: Subscribe for owner's waiter, told the ID
// of a grant to owner and nothing of a grant to another.
func (b *Backend) SubscribeAs(ctx context.Context, key, owner string) (<-chan string, func(), error) {
	w := notify.NewOwner(owner)
	cancel, err := b.join(ctx, key, w, digest(owner))
	return w.Granted, cancel, err
}

func (b *Backend) join(ctx context.Context, key string, w *notify.Waiter, owner string) (func(), error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.hub == nil {
		return nil, display.Errorf("postgres: subscribe: notices off (WithoutNotices): %w", errors.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.hub.join(ctx, digest(key), w, owner)
}

// digest is sha256(s) in hex, as the schema's pg_notify payloads name keys and owners.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (h *hub) join(ctx context.Context, key string, w *notify.Waiter, owner string) (func(), error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, display.Errorf("postgres: subscribe: %w", locker.ErrClosed)
	}
	if h.subs[key] == nil {
		h.subs[key] = map[*notify.Waiter]string{}
	}
	h.subs[key][w] = owner
	h.n++
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.stop == nil {
		h.start()
	}
	gen := h.gen
	h.mu.Unlock()
	var once sync.Once
	cancel := func() { once.Do(func() { h.leave(key, w) }) }
	select {
	case <-gen.ready:
		return cancel, nil
	case <-gen.failed:
		cancel()
		return nil, display.Errorf("postgres: subscribe: %w: %w", locker.ErrUnavailable, gen.err)
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}

// leave ends one subscription; after the last, the listener stops once the linger has passed.
func (h *hub) leave(key string, w *notify.Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[key][w]; !ok {
		return
	}
	delete(h.subs[key], w)
	if len(h.subs[key]) == 0 {
		delete(h.subs, key)
	}
	if h.n--; h.n > 0 || h.stop == nil {
		return
	}
	if h.linger == 0 {
		h.halt()
		return
	}
	h.idle = time.AfterFunc(h.linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.n == 0 && h.idle != nil {
			h.idle = nil
			h.halt()
		}
	})
}

// start starts the listener (h.mu held).
func (h *hub) start() {
	ctx, stop := context.WithCancel(context.Background())
	h.stop, h.done, h.gen = stop, make(chan struct{}), newAttempt()
	go h.listen(ctx, h.done)
}

// halt stops the listener without waiting for it (h.mu held).
func (h *hub) halt() {
	h.stop()
	h.stop, h.gen = nil, nil
}

// close stops the listener, waits until it has closed its connection, and refuses new
// subscriptions.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	done := h.done
	if h.stop != nil {
		h.halt()
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// listen is the listener: one connection at a time, listening until it breaks or ctx ends.
func (h *hub) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	for listened := false; ctx.Err() == nil; {
		err := h.session(ctx, listened)
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		if gen := h.gen; gen != nil && ctx.Err() == nil { // h.gen is this listener's until halt ends ctx (under h.mu)
			select {
			case <-gen.ready: // it listened, then broke: the next attempt has its own
				listened = true
			default:
				gen.err = err
				close(gen.failed)
			}
			h.gen = newAttempt()
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(relistenWait):
		}
	}
}

// session connects, listens and hands out notices until the connection fails or ctx ends.
// again says that an earlier connection listened: every subscription is then told (a notice may
// have been missed in between).
func (h *hub) session(ctx context.Context, again bool) error {
	lctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(lctx, h.cfg.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(cctx) //nolint:errcheck // gone either way
		cancel()
	}()
	if _, err = conn.Exec(lctx, "listen "+pgx.Identifier{h.channel}.Sanitize()); err != nil {
		return err
	}
	h.mu.Lock()
	if h.gen != nil && ctx.Err() == nil {
		close(h.gen.ready)
	}
	if again {
		for _, set := range h.subs {
			for w := range set {
				w.Notify("", "")
			}
		}
	}
	h.mu.Unlock()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.dispatch(n.Payload)
	}
}

// dispatch hands one notice to the subscriptions of its key.
func (h *hub) dispatch(payload string) {
	key, rest, _ := strings.Cut(payload, " ")
	grantee, idHex, _ := strings.Cut(rest, " ")
	id, err := hex.DecodeString(idHex)
	if err != nil {
		id = nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w, owner := range h.subs[key] {
		switch {
		case grantee == "":
			w.Notify("", "")
		case w.Plain != nil:
			w.Notify(grantee, string(id))
		case owner == grantee:
			w.Notify(w.Owner, string(id))
		}
	}
}
