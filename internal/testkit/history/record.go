package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Kind is what an operation did: "acquire" or "release".
type Kind string

// The kinds of operation.
const (
	Acquire Kind = "acquire" // a Lock that returned a lease
	Release Kind = "release" // an Unlock that succeeded
)

// Op is one completed operation of one process. Call and Return are readings of [Now]: the
// operation took effect at some instant between them.
type Op struct {
	Process int    `json:"p"`               // the recording process, from 0
	Kind    Kind   `json:"k"`               // Acquire or Release
	Call    int64  `json:"call"`            // just before the call
	Return  int64  `json:"ret"`             // just after it returned
	Token   uint64 `json:"token,omitempty"` // the lease's fencing token (Acquire; 0 without fencing)
	Holds   int    `json:"holds,omitempty"` // the hold count the acquire reported (Acquire)

	// Shared says the operation took or gave back a shared (read) hold (RLock, or the Unlock
	// of its lease) rather than an exclusive one. Default false: exclusive.
	Shared bool `json:"shared,omitempty"`

	// Limit is, for the acquire of a semaphore's permit (Acquire, TryAcquire) or the release of
	// one (the Unlock of its lease), the semaphore's number of permits. Default 0: a lock's.
	Limit int `json:"limit,omitempty"`
}

// A Recorder collects the operations of one process. Its methods are safe for concurrent use,
// but the operations of one process are expected to follow each other (acquire, release,
// acquire…), as Check verifies.
type Recorder struct {
	process int
	mu      sync.Mutex
	ops     []Op
}

// NewRecorder returns an empty Recorder for the process numbered process (from 0; the numbers
// of the processes of one history should be small and distinct).
func NewRecorder(process int) *Recorder { return &Recorder{process: process} }

// Acquired records an acquire called at call (a reading of Now taken just before Lock) that
// returns now, with the lease's token and hold count.
func (r *Recorder) Acquired(call int64, token uint64, holds int) {
	r.add(Op{Kind: Acquire, Call: call, Return: Now(), Token: token, Holds: holds})
}

// Released records a release called at call (a reading of Now taken just before Unlock) that
// returns now.
func (r *Recorder) Released(call int64) {
	r.add(Op{Kind: Release, Call: call, Return: Now()})
}

// AcquiredShared records a shared acquire (RLock) called at call that returns now, with the
// lease's token (the latest writer's, which a shared hold reports) and hold count.
func (r *Recorder) AcquiredShared(call int64, token uint64, holds int) {
	r.add(Op{Kind: Acquire, Call: call, Return: Now(), Token: token, Holds: holds, Shared: true})
}

// ReleasedShared records the release of a shared hold (the Unlock of an RLock lease) called at
// call that returns now.
func (r *Recorder) ReleasedShared(call int64) {
	r.add(Op{Kind: Release, Call: call, Return: Now(), Shared: true})
}

// AcquiredPermit records the acquire of one of the limit permits of a semaphore (Acquire)
// called at call that returns now, with the permit's token and hold count.
func (r *Recorder) AcquiredPermit(call int64, limit int, token uint64, holds int) {
	r.add(Op{Kind: Acquire, Call: call, Return: Now(), Token: token, Holds: holds, Limit: limit})
}

// ReleasedPermit records the release of a permit of a semaphore of limit (the Unlock of an
// Acquire's lease) called at call that returns now.
func (r *Recorder) ReleasedPermit(call int64, limit int) {
	r.add(Op{Kind: Release, Call: call, Return: Now(), Limit: limit})
}

func (r *Recorder) add(op Op) {
	op.Process = r.process
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of the operations recorded so far, in the order they were recorded.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// WriteFile writes the recorded operations to path as JSON lines, one Op a line, replacing the
// file.
func (r *Recorder) WriteFile(path string) error { return WriteFile(path, r.Ops()) }

// WriteFile writes ops to path as JSON lines, one Op a line, replacing the file: the history of
// several Recorders of one process, for ReadFiles.
func WriteFile(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	w := bufio.NewWriter(f)
	err = Write(w, ops)
	if err == nil {
		err = w.Flush()
	}
	return errors.Join(err, f.Close())
}

// Write writes ops to w as JSON lines.
func Write(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	return nil
}

// Read reads JSON lines written by Write.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	for {
		var op Op
		if err := dec.Decode(&op); errors.Is(err, io.EOF) {
			return ops, nil
		} else if err != nil {
			return nil, fmt.Errorf("history: operation %d: %w", len(ops)+1, err)
		}
		ops = append(ops, op)
	}
}

// ReadFiles reads the histories in paths (written by Recorder.WriteFile) and returns them merged,
// in the order of the files.
func ReadFiles(paths ...string) ([]Op, error) {
	var all []Op
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		ops, err := Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, ops...)
	}
	return all, nil
}
