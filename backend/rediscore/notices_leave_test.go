package rediscore

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// subscribeOne subscribes a waiter to channel.
func subscribeOne(t *testing.T, h *hub, channel string) waiter {
	t.Helper()
	notices, cancel, err := h.subscribe(t.Context(), channel)
	if err != nil {
		t.Fatalf("subscribe %s: %v", channel, err)
	}
	return waiter{channel, notices, cancel}
}

// expectNotice publishes on w's channel and fails the test unless the notice reaches w at once
// (no time passes in the bubble: no timer of a Lock's can have woken it).
func expectNotice(t *testing.T, f *fakePubSub, w waiter, after string) {
	t.Helper()
	if n := f.publish(w.channel); n != 1 {
		t.Fatalf("after %s: %s is subscribed on %d connections, want 1", after, w.channel, n)
	}
	synctest.Wait()
	if !noticed(w) {
		t.Fatalf("after %s: the notice did not reach the waiter", after)
	}
}

// A waiter that leaves a channel another one still waits on leaves it subscribed: the other
// still gets its notices. With WithNoticeLinger(0), where nothing lingers, the last one out
// unsubscribes at once.
func TestNoticesReachRemainingWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePubSub()
		h := newHub(f, 2, 0)
		first, second := subscribeOne(t, h, "a"), subscribeOne(t, h, "a")
		first.cancel()
		synctest.Wait()
		expectNotice(t, f, second, "the other waiter left")
		second.cancel()
		synctest.Wait()
		if n := f.publish("a"); n != 0 {
			t.Fatalf("with WithNoticeLinger(0), the channel is subscribed on %d connections after its last waiter left, want none", n)
		}
	})
}

// A waiter that gives up before the server confirmed its channel leaves another waiter of the
// channel waiting for the confirmation, and subscribed once it comes.
func TestNoticesReachRemainingWaiterUnconfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer lingerOut()
		f := newFakePubSub()
		f.silent = true
		h := newHub(f, 2, DefaultNoticeLinger)
		type result struct {
			w   waiter
			err error
		}
		subscribe := func(ctx context.Context) <-chan result {
			got := make(chan result, 1)
			go func() {
				notices, cancel, err := h.subscribe(ctx, "a")
				got <- result{waiter{"a", notices, cancel}, err}
			}()
			return got
		}
		ctx, giveUp := context.WithCancel(t.Context())
		defer giveUp()
		first := subscribe(ctx)
		synctest.Wait()
		second := subscribe(t.Context())
		synctest.Wait()
		giveUp()
		synctest.Wait()
		select {
		case r := <-first:
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("the subscribe whose ctx ended before the confirmation = %v, want context.Canceled", r.err)
			}
		default:
			t.Fatal("the subscribe whose ctx ended did not return")
		}
		f.confirmHeld()
		synctest.Wait()
		select {
		case r := <-second:
			if r.err != nil {
				t.Fatalf("the remaining waiter's subscribe = %v, want it confirmed", r.err)
			}
			defer r.w.cancel()
			expectNotice(t, f, r.w, "the other waiter gave up before the confirmation")
		default:
			t.Fatal("the remaining waiter's subscribe did not return on the server's confirmation")
		}
	})
}

// A channel whose last waiter left lingers (WithNoticeLinger); a waiter that joins meanwhile
// keeps it subscribed past the linger, for as long as it waits; once that one leaves too, the
// channel goes a linger later.
func TestNoticesLingerKeepsLateWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePubSub()
		h := newHub(f, 2, DefaultNoticeLinger)
		subscribeOne(t, h, "a").cancel()
		time.Sleep(DefaultNoticeLinger / 2)
		late := subscribeOne(t, h, "a")
		time.Sleep(DefaultNoticeLinger) // past the linger of the first waiter's leave
		synctest.Wait()
		expectNotice(t, f, late, "the linger of the previous waiter's leave")
		late.cancel()
		time.Sleep(DefaultNoticeLinger - time.Millisecond)
		synctest.Wait()
		if n := f.publish("a"); n != 1 {
			t.Fatalf("just within a linger of its last waiter's leave, the channel is subscribed on %d connections, want 1", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := f.perNode(); len(n) != 0 {
			t.Fatalf("a linger after its last waiter left: connections %v, want none", n)
		}
	})
}
