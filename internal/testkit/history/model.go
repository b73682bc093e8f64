package history

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"

	"github.com/anishathalye/porcupine"
)

// free is the writer of a lockState when no process holds the lock exclusively.
const free = -1

// procSet is a set of process numbers as a bitset (bit p%8 of byte p/8) without trailing zero
// bytes, so that equal sets are equal strings and a procSet compares with ==.
type procSet string

// has reports whether p is in s.
func (s procSet) has(p int) bool {
	return p >= 0 && p/8 < len(s) && s[p/8]&(1<<(p%8)) != 0
}

// with returns s with p added (in) or removed (p >= 0).
func (s procSet) with(p int, in bool) procSet {
	b := []byte(s)
	for len(b) <= p/8 {
		b = append(b, 0)
	}
	if in {
		b[p/8] |= 1 << (p % 8)
	} else {
		b[p/8] &^= 1 << (p % 8)
	}
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return procSet(b)
}

// size returns how many processes s has.
func (s procSet) size() int {
	n := 0
	for i := range len(s) {
		n += bits.OnesCount8(s[i])
	}
	return n
}

// String lists the processes of s in increasing order: "p1, p9".
func (s procSet) String() string {
	var ps []string
	for i := range len(s) * 8 {
		if s.has(i) {
			ps = append(ps, fmt.Sprintf("p%d", i))
		}
	}
	return strings.Join(ps, ", ")
}

// hash hashes s, with the bytes of w before it.
func (s procSet) hash(w int) uint64 {
	h := fnv.New64a()
	h.Write([]byte{byte(w), byte(w >> 8), byte(w >> 16), byte(w >> 24)})
	h.Write([]byte(s))
	return h.Sum64()
}

// lockState is the lock model's state: free (writer free, no readers), held exclusively by the
// process writer (no readers), or held shared by the processes in readers (writer free).
type lockState struct {
	writer  int
	readers procSet
}

// lockInput is the input of one operation in the lock and semaphore models.
type lockInput struct {
	kind    Kind
	shared  bool
	limit   int // a semaphore's permits (Op.Limit); 0 for a lock
	process int
}

// lockOutput is what an acquire reported (a release reports nothing).
type lockOutput struct {
	token uint64
	holds int
}

// LockModel is the sequential specification of one readers/writer lock, for porcupine: the
// state is free, held exclusively by one process, or held shared by a set of processes. An
// exclusive acquire by p is legal only when the lock is free, and then p holds it exclusively;
// a shared acquire by p is legal when the lock is free or held shared by others, and then p
// joins the readers; either must report one hold (a fresh lock, not a re-entry). A release by
// p is legal only when p holds the lock in the kind the release names (exclusive: then the lock
// is free; shared: then p leaves the readers, and the lock is free once none is left). Inputs
// and outputs are those of [Operations]; a semaphore's operations are never legal in it.
var LockModel = porcupine.Model{
	Init: func() any { return lockState{writer: free} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(lockState), input.(lockInput)
		if in.process < 0 || in.limit != 0 {
			return false, state
		}
		switch {
		case in.kind == Acquire && !in.shared:
			ok := s.writer == free && s.readers == "" && output.(lockOutput).holds == 1
			return ok, lockState{writer: in.process}
		case in.kind == Acquire:
			ok := s.writer == free && !s.readers.has(in.process) && output.(lockOutput).holds == 1
			return ok, lockState{writer: free, readers: s.readers.with(in.process, true)}
		case in.kind == Release && !in.shared:
			return s.writer == in.process, lockState{writer: free}
		case in.kind == Release:
			return s.readers.has(in.process), lockState{writer: free, readers: s.readers.with(in.process, false)}
		}
		return false, state
	},
	Equal:                     func(a, b any) bool { return a.(lockState) == b.(lockState) },
	Hash:                      func(state any) uint64 { s := state.(lockState); return s.readers.hash(s.writer) },
	DescribeOperation:         describeOperation,
	DescribeOperationMetadata: describeTimes,
	DescribeState: func(state any) string {
		s := state.(lockState)
		switch {
		case s.writer != free:
			return fmt.Sprintf("held by p%d", s.writer)
		case s.readers != "":
			return "shared by " + s.readers.String()
		}
		return "free"
	},
}

// SemaphoreModel is the sequential specification of one semaphore, for porcupine: the state is
// the set of processes that hold one of its permits. An acquire of a permit by p is legal only
// when fewer processes than the semaphore's permits (the operation's Limit) hold one and p does
// not, and only with one hold (a fresh permit, not a re-entry); then p holds one. A release by p
// is legal only when p holds a permit, which it then gives back. Inputs and outputs are those
// of [Operations]; a lock's operations (Limit 0) are never legal in it.
var SemaphoreModel = porcupine.Model{
	Init: func() any { return procSet("") },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(procSet), input.(lockInput)
		switch {
		case in.process < 0 || in.limit <= 0 || in.shared:
			return false, state
		case in.kind == Acquire:
			ok := s.size() < in.limit && !s.has(in.process) && output.(lockOutput).holds == 1
			return ok, s.with(in.process, true)
		case in.kind == Release:
			return s.has(in.process), s.with(in.process, false)
		}
		return false, state
	},
	Equal:                     func(a, b any) bool { return a.(procSet) == b.(procSet) },
	Hash:                      func(state any) uint64 { return state.(procSet).hash(0) },
	DescribeOperation:         describeOperation,
	DescribeOperationMetadata: describeTimes,
	DescribeState: func(state any) string {
		if s := state.(procSet); s != "" {
			return "permits held by " + s.String()
		}
		return "free"
	},
}

// describeOperation describes an operation of either model: "p3 acquire shared → token 5,
// holds 1", "p2 release permit of 3".
func describeOperation(input, output any) string {
	in := input.(lockInput)
	kind := string(in.kind)
	switch {
	case in.limit != 0:
		kind += fmt.Sprintf(" permit of %d", in.limit)
	case in.shared:
		kind += " shared"
	}
	if in.kind == Acquire {
		out := output.(lockOutput)
		return fmt.Sprintf("p%d %s → token %d, holds %d", in.process, kind, out.token, out.holds)
	}
	return fmt.Sprintf("p%d %s", in.process, kind)
}

// describeTimes describes an operation's times (opTimes) for the visualization.
func describeTimes(info any) string {
	m := info.(opTimes)
	return fmt.Sprintf("called at %s, returned at %s", ms(m.call), ms(m.ret))
}

// Operations converts ops to porcupine operations of LockModel or SemaphoreModel (the kind of
// ops), with times relative to the earliest call (ClientId is the process).
func Operations(ops []Op) []porcupine.Operation {
	origin := origin(ops)
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		out[i] = porcupine.Operation{
			ClientId: op.Process,
			Input:    lockInput{kind: op.Kind, shared: op.Shared, limit: op.Limit, process: op.Process},
			Call:     op.Call - origin,
			Output:   lockOutput{token: op.Token, holds: op.Holds},
			Return:   op.Return - origin,
			Metadata: opTimes{op.Call - origin, op.Return - origin},
		}
	}
	return out
}

// opTimes are an operation's times relative to the history's first call, for the visualization.
type opTimes struct{ call, ret int64 }

// ms formats nanoseconds as milliseconds to the microsecond.
func ms(ns int64) string { return fmt.Sprintf("%.3fms", float64(ns)/1e6) }

// origin returns the earliest call of ops (0 for none).
func origin(ops []Op) int64 {
	if len(ops) == 0 {
		return 0
	}
	o := ops[0].Call
	for _, op := range ops {
		o = min(o, op.Call)
	}
	return o
}
