package rediscore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// clusterSlots is a decoded CLUSTER SLOTS reply of two masters, one host as []byte (Redigo).
func clusterSlots() any {
	return []any{
		[]any{int64(0), int64(8191), []any{"10.0.0.1", int64(7000), "id1"}, []any{"10.0.0.2", int64(7001), "id2"}},
		[]any{int64(8192), int64(16383), []any{[]byte("::1"), int64(7002)}},
	}
}

func TestSlotMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fetches := 0
		m := NewSlotMap(func(context.Context) (any, error) { fetches++; return clusterSlots(), nil })
		master := func(slot uint16, want string, wantFetches int) {
			t.Helper()
			got, err := m.Master(t.Context(), slot)
			if err != nil || got != want || fetches != wantFetches {
				t.Fatalf("Master(%d) = %q, %v after %d fetches; want %q after %d", slot, got, err, fetches, want, wantFetches)
			}
		}
		master(0, "10.0.0.1:7000", 1)
		master(8191, "10.0.0.1:7000", 1) // cached
		master(8192, "[::1]:7002", 1)
		time.Sleep(slotMapMaxAge + time.Millisecond)
		master(16383, "[::1]:7002", 2) // too old: fetched again
		m.Forget()
		master(1, "10.0.0.1:7000", 3)
		if err := m.ForgetIfMoved(errors.New("ERR other")); err == nil {
			t.Fatal("ForgetIfMoved lost the error")
		}
		master(1, "10.0.0.1:7000", 3) // not a MOVED: kept
		moved := errors.New("MOVED 1 10.0.0.2:7001")
		if err := m.ForgetIfMoved(moved); err != moved {
			t.Fatalf("ForgetIfMoved = %v, want the error itself", err)
		}
		master(1, "10.0.0.1:7000", 4)
	})
}

func TestSlotMapErrors(t *testing.T) {
	refused := errors.New("ERR This instance has cluster support disabled")
	for name, c := range map[string]struct {
		reply any
		err   error
	}{
		"fetch":      {err: refused},
		"not array":  {reply: "OK"},
		"short":      {reply: []any{[]any{int64(0), int64(1)}}},
		"no node":    {reply: []any{[]any{int64(0), int64(1), "node"}}},
		"bad port":   {reply: []any{[]any{int64(0), int64(1), []any{"h", "7000"}}}},
		"bad slot":   {reply: []any{[]any{"0", int64(1), []any{"h", int64(7000)}}}},
		"empty node": {reply: []any{[]any{int64(0), int64(1), []any{"h"}}}},
	} {
		m := NewSlotMap(func(context.Context) (any, error) { return c.reply, c.err })
		addr, err := m.Master(context.Background(), 0)
		if err == nil {
			t.Errorf("%s: Master = %q, want an error", name, addr)
			continue
		}
		if c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("%s: Master error %v does not wrap %v", name, err, c.err)
		}
	}
	m := NewSlotMap(func(context.Context) (any, error) {
		return []any{[]any{int64(0), int64(10), []any{"h", int64(1)}}}, nil
	})
	if addr, err := m.Master(context.Background(), 11); err == nil {
		t.Fatalf("Master of an unserved slot = %q, want an error", addr)
	}
}

func TestSlotMapPubSubNode(t *testing.T) {
	fetches := 0
	m := NewSlotMap(func(context.Context) (any, error) { fetches++; return clusterSlots(), nil })
	ctx := context.Background()
	channel := Channel("{k}") // in the first master's half
	if node, err := m.PubSubNode(ctx, channel, false, slices.Values([]string{"a", "b"})); err != nil || node != "" {
		t.Fatalf("unsharded: %q, %v; want any node", node, err)
	}
	if node, err := m.PubSubNode(ctx, channel, true, slices.Values([]string{"only:1"})); err != nil || node != "only:1" || fetches != 0 {
		t.Fatalf("one node: %q, %v after %d fetches; want only:1, no fetch", node, err, fetches)
	}
	if node, err := m.PubSubNode(ctx, channel, true, slices.Values([]string{"a", "b", "c"})); err != nil || node != "10.0.0.1:7000" {
		t.Fatalf("cluster: %q, %v; want the master of slot %d", node, err, Slot(channel))
	}
}
