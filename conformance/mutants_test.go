package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/notify"
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
	{"reply-window-ignored", "Model"}, // a fresh owner's last release is never remembered
	{"reply-window-ignored", "Client/LostReleaseReply"},
	{"undo-ignored", "Model"},                 // a take-back does nothing
	{"undo-ignored", "Client/NoOrphanedHold"}, // a cancelled Lock leaves its hold for a TTL
	{"fence-per-acquire", "Model"},            // re-entry draws a new fencing token
	{"fence-per-acquire", "Client/Fencing"},
	{"reentry-creates-lock", "Model"},             // a re-entry into a lost hold takes a new lock
	{"force-deletes-anything", "Client/NotALock"}, // an operator deletes a user's list
	{"no-owner-in-inspect", "Model"},              // nobody can tell who holds a lock
	{"no-owner-in-inspect", "Client/InspectOwner"},
	// The seeds' bugs (../shared/README.md), with readers.
	{"ttl-in-nanoseconds", "Kinds/Model"},
	{"renew-without-owner-check", "Kinds/Model"},
	{"reentry-keeps-lease", "Kinds/Model"},
	{"release-without-owner-check", "Kinds/Model"},
	{"upgrade-granted", "Kinds/Model"}, // a reader's Lock is granted: a writer beside readers
	{"upgrade-granted", "Kinds/NoUpgrade"},
	{"readers-ignore-queue", "Kinds/Model"}, // new readers overtake a waiting writer for ever
	{"readers-ignore-queue", "Kinds/WriterPreference"},
	{"fair-jumps-queue", "Kinds/Model"}, // a fair writer ignores the waiters ahead of it
	{"fair-jumps-queue", "Kinds/FairOrder"},
	{"fair-jumps-queue", "Kinds/FairTryLock"},
	{"writers-overtake-readers", "Kinds/Model"}, // a plain writer ignores the readers that wait
	{"writers-overtake-readers", "Kinds/ReaderTurn"},
	{"handoff-keeps-from", "Kinds/Model"},  // the giver keeps a hold beside the new writer
	{"handoff-any-holds", "Kinds/Model"},   // a giver with several holds hands them all off
	{"handoff-keeps-fence", "Kinds/Model"}, // the new writer gets the old writer's token
	{"handoff-hides-queue", "Kinds/Model"}, // a hand-off reports nobody waiting: others starve
	{"no-dequeue", "Kinds/Model"},          // a waiter that gives up blocks the others until its Wait ends
	{"no-dequeue", "Kinds/WriterPreference"},
	{"queue-never-expires", "Kinds/Model"}, // a dead waiter blocks the key for ever
	{"queue-never-expires", "Kinds/DeadWriter"},
	{"shared-advances-fence", "Kinds/Model"}, // readers draw fencing tokens
	{"shared-advances-fence", "Kinds/SharedFencing"},
	{"grant-keeps-fence", "Kinds/Grants"},     // a grant gives the waiter the old writer's token
	{"grant-kept-on-dequeue", "Kinds/Grants"}, // a waiter that gives up keeps the key it was granted
	// Readers' leases: every hold keeps its own.
	{"one-lease-for-readers", "Kinds/Model"}, // a reader's acquire or renewal sets every reader's lease
	{"one-lease-for-readers", "Kinds/ReaderLeases"},
	{"one-lease-for-readers", "Kinds/FixedReaderLeases"},
	{"ended-reader-counts", "Kinds/Model"}, // a reader whose lease ended holds on while another's runs
	// Notices of shared holds: readers that wait sleep until their timers.
	{"no-downgrade-notice", "Kinds/DowngradeWakesReaders"}, // a writer's Unlock that leaves it reading
	{"no-join-notice", "Kinds/ReaderWakesReaders"},         // a reader's grant that lets readers behind it in
	// Semaphores: never more than n inside, every permit its own lease.
	{"permits-off-by-one", "Semaphores/Model"}, // n+1 holders
	{"permits-off-by-one", "Semaphores/Exclusion"},
	{"permit-release-any-owner", "Semaphores/Model"}, // a release frees another owner's permit
	{"permit-never-expires", "Semaphores/Model"},     // a crashed holder keeps its permit for ever
	{"permit-never-expires", "Semaphores/CrashedHolder"},
	{"one-lease-for-permits", "Semaphores/Model"}, // a holder's renewal sets every permit's lease
	{"one-lease-for-permits", "Semaphores/PermitLeases"},
	{"limit-ignored", "Semaphores/Model"}, // a request with another n gets a permit: more than n inside
	{"limit-ignored", "Semaphores/LimitMismatch"},
	{"permits-share-token", "Semaphores/Model"}, // a new permit reports the latest token, as a reader does
	{"permits-share-token", "Semaphores/Fencing"},
	{"fair-permit-jumps-queue", "Semaphores/Model"}, // a fair permit request passes the waiters ahead
	{"fair-permit-jumps-queue", "Semaphores/FairOrder"},
	{"no-permit-notice", "Semaphores/NoticeWakesWaiter"}, // a permit's release wakes nobody
	{"permit-handoff-keeps-from", "Semaphores/Model"},    // a hand-off adds a permit: n+1 holders
	{"permit-handoff-keeps-from", "Semaphores/HandOff"},
	{"no-permit-grant", "Semaphores/Model"}, // a release of a permit wakes every waiter, and grants none
	{"no-permit-grant", "Semaphores/Grants"},
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
			// 2000 runs of each state machine, not rapid's 100: a bug that a run finds with a
			// few percent chance (fair-jumps-queue) is then caught every time.
			cmd := exec.Command(os.Args[0], "-test.run=^TestMutantChild$", "-test.v", "-test.count=1",
				"-rapid.checks=2000")
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

var _ locker.Semaphorer = (*mutant)(nil)

// MaxLimit implements locker.Semaphorer.
func (m *mutant) MaxLimit() int { return 1 << 10 }

// mutant is a small in-memory KindLocker, correct unless bug names a flaw.
type mutant struct {
	bug     string
	mu      sync.Mutex
	locks   map[string]*mutantLock
	queues  map[string][]mutantEntry
	subs    map[string]map[*notify.Waiter]struct{}
	fences  map[string]uint64
	markers map[string]int                  // key + " " + request ID -> outcome (never forgotten: a test is short)
	foreign map[string]string               // keys that hold something else than a lock (Factory.Foreign)
	records map[string]map[string]time.Time // grant records: key -> owner -> end
}

// mutantLock is exclusive (owner set, holds >= 1, maybe shared holds of owner; its lease ends
// at expires) or shared (owner "", readers in shared, each reader's lease ending at until), or a
// semaphore of limit permits (shared, with the token of each holder's permit in tokens).
type mutantLock struct {
	owner   string
	holds   int
	shared  map[string]int
	expires time.Time
	until   map[string]time.Time
	limit   int
	tokens  map[string]uint64
}

// end returns when the lock's lease ends: the exclusive holder's, or the latest reader's.
func (l *mutantLock) end() time.Time {
	if l.owner != "" {
		return l.expires
	}
	var last time.Time
	for _, u := range l.until {
		if u.After(last) {
			last = u
		}
	}
	return last
}

// setLease sets owner's lease to end at end: the exclusive holder's, or that reader's alone,
// unless bug "one-lease-for-readers" makes it every reader's (the key's TTL, which the latest
// reader sets).
func (m *mutant) setLease(l *mutantLock, owner string, end time.Time) {
	switch {
	case l.owner != "":
		l.expires = end
	case l.limit > 0 && m.bug == "permit-never-expires":
		l.until[owner] = time.Now().Add(time.Hour)
	case (l.limit == 0 && m.bug == "one-lease-for-readers") || (l.limit > 0 && m.bug == "one-lease-for-permits"):
		for o := range l.shared {
			l.until[o] = end
		}
	default:
		l.until[owner] = end
	}
}

// leave forgets owner's shared holds on l.
func (l *mutantLock) leave(owner string) {
	delete(l.shared, owner)
	delete(l.until, owner)
	delete(l.tokens, owner)
}

// mutantEntry is a wait queue entry: 'x' fair writer, 's' fair reader, 'w' plain writer, 'r'
// plain reader.
type mutantEntry struct {
	owner    string
	kind     byte
	deadline time.Time
	grant    time.Duration // the lease of the grant it asks for (Granter); 0: none
	fence    bool
	id       string // the request that last queued it
	limit    int    // the grant is of a permit of a semaphore of limit; 0: of the lock
}

func (e mutantEntry) reader() bool { return e.kind == 's' || e.kind == 'r' }

func (l *mutantLock) total(owner string) int {
	if l == nil {
		return 0
	}
	n := l.shared[owner]
	if l.owner == owner {
		n += l.holds
	}
	return n
}

func newMutant(bug string) *mutant {
	return &mutant{bug: bug, locks: map[string]*mutantLock{}, queues: map[string][]mutantEntry{},
		subs: map[string]map[*notify.Waiter]struct{}{}, fences: map[string]uint64{}, markers: map[string]int{},
		foreign: map[string]string{}, records: map[string]map[string]time.Time{}}
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

// get returns the live lock on key, without the readers whose lease ended (unless bug
// "ended-reader-counts": they hold on while any reader's lease runs). m.mu is held.
func (m *mutant) get(key string) *mutantLock {
	l := m.locks[key]
	if l != nil && l.owner == "" && m.bug != "ended-reader-counts" {
		for o, u := range l.until {
			if !time.Now().Before(u) {
				l.leave(o)
			}
		}
	}
	if l != nil && !time.Now().Before(l.end()) {
		delete(m.locks, key)
		return nil
	}
	return l
}

// queue returns the live entries of key's queue. m.mu is held.
func (m *mutant) queue(key string) []mutantEntry {
	q := m.queues[key][:0]
	for _, e := range m.queues[key] {
		if time.Now().Before(e.deadline) || m.bug == "queue-never-expires" {
			q = append(q, e)
		}
	}
	m.queues[key] = q
	return q
}

// admits reports whether a new hold of req may be granted on key, whose lock is l. m.mu is held.
func (m *mutant) admits(req locker.AcquireRequest, l *mutantLock) bool {
	permit := req.Limit > 0
	most := req.Limit
	if m.bug == "permits-off-by-one" {
		most++
	}
	switch {
	case l != nil && (!req.Shared || l.owner != ""):
		return false
	case permit && l != nil && len(l.shared) >= most:
		return false
	case permit && !req.Fair, !req.Shared && !req.Fair && req.Wait == 0:
		return true
	}
	for _, e := range m.queue(req.Key) {
		switch {
		case e.owner == req.Owner:
			return true
		case permit:
			if m.bug != "fair-permit-jumps-queue" {
				return false
			}
		case req.Fair && !(req.Shared && e.reader()):
			if m.bug != "fair-jumps-queue" {
				return false
			}
		case !req.Fair && req.Shared != e.reader():
			if !(m.bug == "readers-ignore-queue" && req.Shared) && !(m.bug == "writers-overtake-readers" && !req.Shared) {
				return false
			}
		}
	}
	return true
}

// enqueue puts req's owner in key's queue for req.Wait, keeping its place. m.mu is held.
func (m *mutant) enqueue(req locker.AcquireRequest) {
	q := m.queue(req.Key)
	deadline := time.Now().Add(req.Wait)
	var grant time.Duration
	if req.Grant > 0 && req.Fresh && (!req.Shared || req.Limit > 0) {
		grant = req.Grant
	}
	for i := range q {
		if q[i].owner == req.Owner {
			q[i].deadline, q[i].grant, q[i].fence, q[i].id, q[i].limit = deadline, grant, req.Fence, req.ID, req.Limit
			return
		}
	}
	kind := byte('w')
	switch {
	case !req.Fair && req.Shared:
		kind = 'r'
	case req.Fair && req.Shared:
		kind = 's'
	case req.Fair:
		kind = 'x'
	}
	delete(m.records[req.Key], req.Owner)
	m.queues[req.Key] = append(q, mutantEntry{req.Owner, kind, deadline, grant, req.Fence, req.ID, req.Limit})
}

// free follows the end of the last hold on key: the head of the queue is granted it if it
// asked for that, and the subscribers are notified. m.mu is held.
func (m *mutant) free(key string) {
	q := m.queue(key)
	switch {
	case len(q) > 0 && q[0].grant > 0 && q[0].limit > 0:
		m.locks[key] = &mutantLock{shared: map[string]int{}, until: map[string]time.Time{}, limit: q[0].limit, tokens: map[string]uint64{}}
		m.permitFreed(key, m.locks[key])
	case len(q) > 0 && q[0].grant > 0:
		head := q[0]
		m.queues[key] = q[1:]
		m.locks[key] = &mutantLock{owner: head.owner, holds: 1, shared: map[string]int{}, expires: m.lease(head.grant), until: map[string]time.Time{}}
		if head.fence && m.bug != "grant-keeps-fence" {
			m.fences[key]++
		}
		m.recordGrant(key, head)
	default:
		m.notify(key)
	}
}

// permitFreed follows the end of a permit of l, a semaphore on key, or its first (free): the
// head of the queue is granted a permit if it asked for one of l's limit, else the subscribers
// are notified. m.mu is held.
func (m *mutant) permitFreed(key string, l *mutantLock) {
	q := m.queue(key)
	if len(q) == 0 || q[0].grant == 0 || q[0].limit != l.limit || len(l.shared) >= l.limit || m.bug == "no-permit-grant" {
		if m.bug != "no-permit-notice" {
			m.notify(key)
		}
		return
	}
	head := q[0]
	m.queues[key] = q[1:]
	l.shared[head.owner] = 1
	m.setLease(l, head.owner, m.lease(head.grant))
	if head.fence {
		m.fences[key]++
		l.tokens[head.owner] = m.fences[key]
	}
	m.recordGrant(key, head)
}

// recordGrant records the grant to head on key until its lease ends, and notifies head's owner.
// m.mu is held.
func (m *mutant) recordGrant(key string, head mutantEntry) {
	if m.records[key] == nil {
		m.records[key] = map[string]time.Time{}
	}
	m.records[key][head.owner] = time.Now().Add(ceilMillis(head.grant))
	m.notifyAs(key, head.owner, head.id)
}

// record removes owner's live grant record on key, if any, and reports whether there was one.
// m.mu is held.
func (m *mutant) record(key, owner string) bool {
	d, ok := m.records[key][owner]
	delete(m.records[key], owner)
	return ok && time.Now().Before(d)
}

// dequeue removes owner's entry from key's queue and reports whether live entries were behind
// it. m.mu is held.
func (m *mutant) dequeue(key, owner string) bool {
	q := m.queue(key)
	for i, e := range q {
		if e.owner == owner {
			m.queues[key] = append(q[:i], q[i+1:]...)
			return i < len(q)-1
		}
	}
	m.record(key, owner)
	return false
}

func (m *mutant) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, owner := req.Key, req.Owner
	if err := m.notALock(key); err != nil {
		return locker.Acquisition{}, err
	}
	if req.Limit > 0 {
		req.Shared = true
	}
	l := m.get(key)
	if done, ok := m.marker(key, req.ID); ok {
		if done > 0 && l.total(owner) > 0 {
			return locker.Acquisition{Holds: done, Token: m.token(req, l)}, nil
		}
		return locker.Acquisition{}, nil
	}
	if l != nil && l.limit != req.Limit {
		if m.bug != "limit-ignored" || l.limit == 0 || req.Limit == 0 {
			return locker.Acquisition{}, fmt.Errorf("mutant: limit %d, not %d: %w", l.limit, req.Limit, locker.ErrLimitMismatch)
		}
		req.Limit = l.limit // the bug: any n gets a permit of the key's semaphore
	}
	if req.Fresh && l.total(owner) > 0 && m.bug != "request-id-ignored" {
		m.setLease(l, owner, m.lease(req.TTL))
		if (req.Shared && req.Limit == 0) || req.Fair || req.Wait > 0 {
			m.dequeue(key, owner) // a grant taken
		}
		return locker.Acquisition{Holds: l.total(owner), Token: m.token(req, l)}, nil
	}
	if req.Reentry && l.total(owner) == 0 && m.bug != "reentry-creates-lock" {
		return locker.Acquisition{}, fmt.Errorf("mutant: %w", locker.ErrNotHeld)
	}
	if l == nil && m.bug == "non-atomic-acquire" {
		m.mu.Unlock()
		runtime.Gosched()
		m.mu.Lock()
	}
	switch {
	case l.total(owner) > 0 && !req.Shared && l.owner == "" && m.bug != "upgrade-granted":
		return locker.Acquisition{}, fmt.Errorf("mutant: %w", locker.ErrUpgrade)
	case l.total(owner) > 0 && !req.Shared && l.owner == "": // the bug: an upgrade
		l.owner, l.holds = owner, 1
		l.expires = m.lease(req.TTL)
	case l.total(owner) > 0:
		if req.Shared {
			l.shared[owner]++
		} else {
			l.holds++
		}
		if m.bug != "reentry-keeps-lease" {
			m.setLease(l, owner, m.lease(req.TTL))
		}
		if req.Fence && (m.bug == "fence-per-acquire" || (req.Shared && m.bug == "shared-advances-fence")) {
			m.fences[key]++
		}
	case !m.admits(req, l):
		if req.Wait > 0 {
			m.enqueue(req)
		}
		switch {
		case l == nil:
			return locker.Acquisition{}, nil
		case l.limit > 0:
			first := l.end()
			for _, u := range l.until {
				if u.Before(first) {
					first = u
				}
			}
			return locker.Acquisition{TTL: time.Until(first), Taken: len(l.shared)}, nil
		}
		return locker.Acquisition{TTL: time.Until(l.end())}, nil
	default:
		if l == nil {
			l = &mutantLock{shared: map[string]int{}, until: map[string]time.Time{}, limit: req.Limit, tokens: map[string]uint64{}}
			m.locks[key] = l
		}
		if req.Shared {
			l.shared[owner]++
		} else {
			l.owner, l.holds = owner, 1
		}
		if req.Fence && (!req.Shared || m.bug == "shared-advances-fence" || (l.limit > 0 && m.bug != "permits-share-token")) {
			m.fences[key]++
		}
		if req.Fence && l.limit > 0 {
			l.tokens[owner] = m.fences[key]
		}
		m.setLease(l, owner, m.lease(req.TTL))
		if behind := m.dequeue(key, owner); behind && req.Shared && m.bug != "no-join-notice" {
			if q := m.queue(key); len(q) > 0 && q[0].reader() {
				m.notify(key) // readers at the head may join
			}
		}
	}
	holds := l.total(owner)
	if !req.Fresh {
		m.remember(key, req.ID, holds)
	}
	return locker.Acquisition{Holds: holds, Token: m.token(req, l)}, nil
}

// token is the fencing token to report for req on l: the key's latest, or the token of the
// owner's permit on a semaphore.
func (m *mutant) token(req locker.AcquireRequest, l *mutantLock) uint64 {
	switch {
	case !req.Fence:
		return 0
	case l != nil && l.limit > 0 && m.bug != "permits-share-token":
		return l.tokens[req.Owner]
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
	all := req.Undo && req.Fresh
	switch {
	case l != nil && l.owner != "" && l.owner != owner && !req.Shared && m.bug == "release-without-owner-check":
		l.owner, l.holds = owner, 1
	case l != nil && l.owner == "" && l.shared[owner] == 0 && req.Shared && m.bug == "release-without-owner-check":
		l.shared = map[string]int{owner: 1} // a plain DEL: every reader's holds go
	case l != nil && l.limit > 0 && l.shared[owner] == 0 && req.Shared && m.bug == "permit-release-any-owner":
		for o := range l.shared {
			l.shared[owner], l.until[owner] = l.shared[o], l.until[o]
			l.leave(o) // another owner's permit, released as if it were owner's
			break
		}
	case l == nil, all && l.total(owner) == 0, !all && req.Shared && l.shared[owner] == 0,
		!all && !req.Shared && l.owner != owner:
		return 0, fmt.Errorf("mutant: %w", locker.ErrNotHeld)
	}
	switch {
	case all:
		l.leave(owner)
		if l.owner == owner {
			l.owner, l.holds = "", 0
		}
		if l.limit > 0 && len(l.shared) > 0 {
			m.permitFreed(key, l)
		}
	case req.Shared:
		if l.shared[owner]--; l.shared[owner] == 0 {
			l.leave(owner)
			if l.limit > 0 && len(l.shared) > 0 {
				m.permitFreed(key, l) // a permit is free
			}
		}
	default:
		if l.holds--; l.holds == 0 {
			l.owner = ""
			if len(l.shared) > 0 {
				l.until[owner] = l.expires // a reader now, with the lease it had
				if m.bug != "no-downgrade-notice" {
					m.notify(key) // readers may join
				}
			}
		}
	}
	left := l.total(owner)
	if !req.Undo && (left > 0 || !req.Fresh || (req.ReplyWindow > 0 && m.bug != "reply-window-ignored")) {
		m.remember(key, req.ID, left) // for ever: longer than any window
	}
	if l.owner == "" && len(l.shared) == 0 {
		delete(m.locks, key)
		if m.bug != "no-notice-on-release" {
			m.free(key)
		}
	}
	return left, nil
}

func (m *mutant) Renew(ctx context.Context, batch []locker.Renewal) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := make([]error, len(batch))
	for i, r := range batch {
		l := m.get(r.Key)
		if l == nil || (l.total(r.Owner) == 0 && m.bug != "renew-without-owner-check") {
			errs[i] = fmt.Errorf("mutant: %w", locker.ErrNotHeld)
			continue
		}
		m.setLease(l, r.Owner, m.lease(r.TTL))
	}
	return errs
}

func (m *mutant) Inspect(ctx context.Context, key string) (locker.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.notALock(key); err != nil {
		return locker.State{}, err
	}
	st := locker.State{Queued: len(m.queue(key))}
	l := m.get(key)
	switch {
	case l == nil:
	case l.owner != "":
		st.Locked, st.Owner, st.Holds, st.TTL = true, l.owner, l.total(l.owner), time.Until(l.expires)
		st.Holders = []locker.Holder{{Owner: l.owner, Holds: st.Holds, TTL: st.TTL}}
	default:
		st.Locked, st.TTL = true, time.Until(l.end())
		if l.limit > 0 {
			st.Limit = l.limit
		} else {
			st.Shared, st.Readers = true, len(l.shared)
		}
		for o, n := range l.shared {
			st.Owner = o
			st.Holds += n
			st.Holders = append(st.Holders, locker.Holder{Owner: o, Holds: n, TTL: time.Until(l.until[o])})
		}
		slices.SortFunc(st.Holders, func(a, b locker.Holder) int { return strings.Compare(a.Owner, b.Owner) })
	}
	if m.bug == "no-owner-in-inspect" {
		st.Owner = ""
	}
	return st, nil
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

var _ locker.HandOffer = (*mutant)(nil)

func (m *mutant) HandOff(ctx context.Context, req locker.HandOffRequest) (locker.HandOffResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.get(req.Key)
	fence := locker.AcquireRequest{Key: req.Key, Owner: req.To, Fence: req.Fence}
	switch {
	case l.total(req.To) > 0:
		m.setLease(l, req.To, m.lease(req.TTL))
		return locker.HandOffResult{Holds: l.total(req.To), Token: m.token(fence, l), Queued: m.others(req.Key, req.To)}, nil
	case l != nil && l.limit > 0 && l.shared[req.From] == 1:
		if m.bug != "permit-handoff-keeps-from" {
			l.leave(req.From)
		}
		l.shared[req.To] = 1
		m.setLease(l, req.To, m.lease(req.TTL))
		if req.Fence {
			m.fences[req.Key]++
			l.tokens[req.To] = m.fences[req.Key]
		}
		m.dequeue(req.Key, req.To)
		return locker.HandOffResult{Holds: 1, Token: m.token(fence, l), Queued: m.others(req.Key, req.To)}, nil
	case l == nil || l.owner != req.From || l.shared[req.From] > 0 || (l.holds != 1 && m.bug != "handoff-any-holds"):
		return locker.HandOffResult{}, fmt.Errorf("mutant: hand off: %w", locker.ErrNotHeld)
	}
	if m.bug == "handoff-keeps-from" {
		if l.shared == nil {
			l.shared = map[string]int{}
		}
		l.shared[req.From]++ // From keeps a hold beside the new writer
	}
	l.owner, l.holds, l.expires = req.To, 1, m.lease(req.TTL)
	if req.Fence && m.bug != "handoff-keeps-fence" {
		m.fences[req.Key]++
	}
	m.dequeue(req.Key, req.To)
	return locker.HandOffResult{Holds: 1, Token: m.token(fence, l), Queued: m.others(req.Key, req.To)}, nil
}

// others counts the live entries of key's queue of other owners than owner. m.mu is held.
func (m *mutant) others(key, owner string) int {
	n := 0
	for _, e := range m.queue(key) {
		if e.owner != owner && m.bug != "handoff-hides-queue" {
			n++
		}
	}
	return n
}

func (m *mutant) Dequeue(ctx context.Context, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bug == "no-dequeue" {
		return nil
	}
	q := m.queue(key)
	for i, e := range q {
		if e.owner == owner {
			m.queues[key] = append(q[:i], q[i+1:]...)
			if i < len(q)-1 {
				m.notify(key)
			}
			return nil
		}
	}
	l := m.get(key)
	granted := m.record(key, owner)
	switch {
	case granted && l != nil && l.owner == owner && l.holds == 1 && len(l.shared) == 0 && m.bug != "grant-kept-on-dequeue":
		delete(m.locks, key) // a grant not taken, given back
		m.free(key)
	case granted && l != nil && l.limit > 0 && l.shared[owner] == 1:
		l.leave(owner) // a permit granted and not taken, given back
		if len(l.shared) == 0 {
			delete(m.locks, key)
			m.free(key)
		} else {
			m.permitFreed(key, l)
		}
	}
	return nil
}

var _ locker.Granter = (*mutant)(nil)

func (m *mutant) SubscribeAs(ctx context.Context, key, owner string) (<-chan string, func(), error) {
	w := notify.NewOwner(owner)
	return w.Granted, m.join(key, w), nil
}

func (m *mutant) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	w := notify.NewPlain()
	return w.Plain, m.join(key, w), nil
}

// join adds the subscription w of key and returns its cancel function.
func (m *mutant) join(key string, w *notify.Waiter) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs[key] == nil {
		m.subs[key] = map[*notify.Waiter]struct{}{}
	}
	m.subs[key][w] = struct{}{}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs[key], w)
	}
}

// notify wakes the subscribers of key. m.mu is held.
func (m *mutant) notify(key string) { m.notifyAs(key, "", "") }

// notifyAs sends the notice of a grant to grantee with request ID id ("", "": none) to the
// subscribers of key. m.mu is held.
func (m *mutant) notifyAs(key, grantee, id string) {
	for w := range m.subs[key] {
		w.Notify(grantee, id)
	}
}
