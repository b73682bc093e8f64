package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// The suite must catch the bugs of the documents this project grew from (and a few more). Each
// mutant is a deliberately broken backend; TestMutants runs the suite on each in a child process
// and asserts that it fails, in the subtest that should catch it, while the same backend without
// the bug passes.
var mutants = []struct {
	bug      string
	caughtBy string // the subtest of Run that must fail
}{
	{"", ""},                               // no bug: the whole suite passes
	{"ttl-in-nanoseconds", "Model"},        // a time.Duration passed where milliseconds are due
	{"renew-without-owner-check", "Model"}, // a bare PEXPIRE: extends anyone's lock
	{"reentry-keeps-lease", "Model"},       // re-entry adds a hold but does not reset the lease
	{"reentry-keeps-lease", "Client/ReentryResetsLease"},
	{"release-without-owner-check", "Model"},   // a plain DEL: releases anyone's lock
	{"non-atomic-acquire", "Exclusion"},        // check, then set, in two steps
	{"fixed-lease-renewed", "Model"},           // the lease never ends
	{"no-notice-on-release", "Client/Notices"}, // waiters sleep through a release
	{"no-notice-on-release", "Client/NoticeWakesWaiter"},
	{"request-id-ignored", "Model"}, // a release sent again removes a second hold
	{"request-id-ignored", "Client/LostAcquireReply"},
	{"request-id-ignored", "Client/LostReleaseReply"},
	{"undo-ignored", "Model"},                 // a take-back does nothing
	{"undo-ignored", "Client/NoOrphanedHold"}, // a cancelled Lock leaves its hold for a TTL
	{"fence-per-acquire", "Model"},            // re-entry draws a new fencing token
	{"fence-per-acquire", "Client/Fencing"},
	{"reentry-creates-lock", "Model"},             // a re-entry into a lost hold takes a new lock
	{"force-deletes-anything", "Client/NotALock"}, // an operator deletes a user's list
	{"no-owner-in-inspect", "Model"},              // nobody can tell who holds a lock
	{"no-owner-in-inspect", "Client/InspectOwner"},
}

const mutantEnv = "CONFORMANCE_MUTANT"

func TestMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite once per mutant in child processes")
	}
	for _, m := range mutants {
		name := m.bug
		if name == "" {
			name = "none"
		}
		t.Run(name+"/"+strings.ReplaceAll(m.caughtBy, "/", "."), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMutantChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+m.bug, "RAPID_NOFAILFILE=1")
			out, err := cmd.CombinedOutput()
			if m.bug == "" {
				if err != nil {
					t.Fatalf("the suite fails on the backend without a bug: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("the suite passes on a backend with bug %q", m.bug)
			}
			if want := "--- FAIL: TestMutantChild/" + m.caughtBy + " "; !strings.Contains(string(out), want) {
				t.Fatalf("bug %q was not caught by %s:\n%s", m.bug, m.caughtBy, out)
			}
			if m.caughtBy == "Model" && !strings.Contains(string(out), "-rapid.seed=") {
				t.Fatalf("the state machine's failure of bug %q prints no seed to replay:\n%s", m.bug, out)
			}
		})
	}
}

// TestMutantChild runs the suite on the mutant named in the environment; TestMutants starts it.
func TestMutantChild(t *testing.T) {
	bug, ok := os.LookupEnv(mutantEnv)
	if !ok {
		t.Skip("run by TestMutants in a child process")
	}
	var m *mutant
	Run(t, Factory{
		New:      func(TB) locker.Locker { m = newMutant(bug); return m },
		Synctest: true,
		Foreign: func(_ TB, key string, i int) func() bool {
			if i > 0 {
				return nil
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			m.foreign[key] = "a list"
			return func() bool {
				m.mu.Lock()
				defer m.mu.Unlock()
				return m.foreign[key] == "a list"
			}
		},
	})
}

// mutant is a small in-memory Locker, correct unless bug names a flaw.
type mutant struct {
	bug     string
	mu      sync.Mutex
	locks   map[string]*mutantLock
	subs    map[string]map[chan struct{}]bool
	fences  map[string]uint64
	markers map[string]int    // key + " " + request ID -> outcome (never forgotten: a test is short)
	foreign map[string]string // keys that hold something else than a lock (Factory.Foreign)
}

type mutantLock struct {
	owner   string
	holds   int
	expires time.Time
}

func newMutant(bug string) *mutant {
	return &mutant{bug: bug, locks: map[string]*mutantLock{}, subs: map[string]map[chan struct{}]bool{},
		fences: map[string]uint64{}, markers: map[string]int{}, foreign: map[string]string{}}
}

// notALock returns an error wrapping ErrNotALock when key holds a foreign value. m.mu is held.
func (m *mutant) notALock(key string) error {
	if _, ok := m.foreign[key]; ok {
		return fmt.Errorf("mutant: %w", locker.ErrNotALock)
	}
	return nil
}

// marker returns the remembered outcome of request id on key. m.mu is held.
func (m *mutant) marker(key, id string) (int, bool) {
	if id == "" || m.bug == "request-id-ignored" {
		return 0, false
	}
	n, ok := m.markers[key+" "+id]
	return n, ok
}

func (m *mutant) remember(key, id string, n int) {
	if id != "" {
		m.markers[key+" "+id] = n
	}
}

func (m *mutant) lease(ttl time.Duration) time.Time {
	ttl = ceilMillis(ttl)
	switch m.bug {
	case "ttl-in-nanoseconds":
		ttl *= time.Duration(time.Millisecond) // what PEXPIRE does with a Duration's nanoseconds
	case "fixed-lease-renewed":
		ttl = time.Hour
	}
	return time.Now().Add(ttl)
}

// get returns the live lock on key. m.mu is held.
func (m *mutant) get(key string) *mutantLock {
	l := m.locks[key]
	if l != nil && !time.Now().Before(l.expires) {
		delete(m.locks, key)
		return nil
	}
	return l
}

func (m *mutant) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, owner := req.Key, req.Owner
	if err := m.notALock(key); err != nil {
		return locker.Acquisition{}, err
	}
	l := m.get(key)
	if done, ok := m.marker(key, req.ID); ok {
		if done > 0 && l != nil && l.owner == owner {
			return locker.Acquisition{Holds: done, Token: m.token(req)}, nil
		}
		return locker.Acquisition{}, nil
	}
	if req.Fresh && l != nil && l.owner == owner && m.bug != "request-id-ignored" {
		l.expires = m.lease(req.TTL)
		return locker.Acquisition{Holds: l.holds, Token: m.token(req)}, nil
	}
	if req.Reentry && (l == nil || l.owner != owner) && m.bug != "reentry-creates-lock" {
		return locker.Acquisition{}, fmt.Errorf("mutant: %w", locker.ErrNotHeld)
	}
	if l == nil && m.bug == "non-atomic-acquire" {
		m.mu.Unlock()
		runtime.Gosched()
		m.mu.Lock()
	}
	switch {
	case l == nil:
		l = &mutantLock{owner: owner, holds: 1, expires: m.lease(req.TTL)}
		if req.Fence {
			m.fences[key]++
		}
		m.locks[key] = l
	case l.owner == owner:
		l.holds++
		if m.bug != "reentry-keeps-lease" {
			l.expires = m.lease(req.TTL)
		}
		if req.Fence && m.bug == "fence-per-acquire" {
			m.fences[key]++
		}
	default:
		return locker.Acquisition{TTL: time.Until(l.expires)}, nil
	}
	if !req.Fresh {
		m.remember(key, req.ID, l.holds)
	}
	return locker.Acquisition{Holds: l.holds, Token: m.token(req)}, nil
}

func (m *mutant) token(req locker.AcquireRequest) uint64 {
	if !req.Fence {
		return 0
	}
	return m.fences[req.Key]
}

func (m *mutant) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, owner := req.Key, req.Owner
	if err := m.notALock(key); err != nil {
		return 0, err
	}
	if req.Undo {
		if m.bug == "undo-ignored" {
			return 0, fmt.Errorf("mutant: %w", locker.ErrNotHeld)
		}
		done, ok := m.markers[key+" "+req.ID]
		m.markers[key+" "+req.ID] = 0
		if (ok && done == 0) || (!ok && !req.Fresh) {
			return 0, fmt.Errorf("mutant: %w", locker.ErrNotHeld)
		}
	} else if done, ok := m.marker(key, req.ID); ok {
		return done, nil
	}
	l := m.get(key)
	switch {
	case l != nil && l.owner != owner && m.bug == "release-without-owner-check":
		l.holds = 1
	case l == nil || l.owner != owner:
		return 0, fmt.Errorf("mutant: %w", locker.ErrNotHeld)
	}
	if req.Undo && req.Fresh {
		l.holds = 0
	} else {
		l.holds--
	}
	if !req.Undo {
		m.remember(key, req.ID, l.holds)
	}
	if l.holds == 0 {
		delete(m.locks, key)
		if m.bug != "no-notice-on-release" {
			m.notify(key)
		}
	}
	return l.holds, nil
}

func (m *mutant) Renew(ctx context.Context, batch []locker.Renewal) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := make([]error, len(batch))
	for i, r := range batch {
		l := m.get(r.Key)
		if l == nil || (l.owner != r.Owner && m.bug != "renew-without-owner-check") {
			errs[i] = fmt.Errorf("mutant: %w", locker.ErrNotHeld)
			continue
		}
		l.expires = m.lease(r.TTL)
	}
	return errs
}

func (m *mutant) Inspect(ctx context.Context, key string) (locker.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.notALock(key); err != nil {
		return locker.State{}, err
	}
	if l := m.get(key); l != nil {
		st := locker.State{Locked: true, Owner: l.owner, Holds: l.holds, TTL: time.Until(l.expires)}
		if m.bug == "no-owner-in-inspect" {
			st.Owner = ""
		}
		return st, nil
	}
	return locker.State{}, nil
}

func (m *mutant) ForceRelease(ctx context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bug == "force-deletes-anything" {
		delete(m.foreign, key)
	} else if err := m.notALock(key); err != nil {
		return false, err
	}
	if m.get(key) == nil {
		return false, nil
	}
	delete(m.locks, key)
	m.notify(key)
	return true, nil
}

func (m *mutant) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{}, 1)
	if m.subs[key] == nil {
		m.subs[key] = map[chan struct{}]bool{}
	}
	m.subs[key][ch] = true
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs[key], ch)
	}, nil
}

// notify wakes the subscribers of key. m.mu is held.
func (m *mutant) notify(key string) {
	for ch := range m.subs[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
