package history

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// free is the writer of a lockState when no process holds the lock exclusively.
const free = -1

// lockState is the lock model's state: free (writer free, no readers), held exclusively by the
// process writer (no readers), or held shared by the processes in readers (writer free).
// readers is a set of process numbers as a bitset (bit p%8 of byte p/8) without trailing zero
// bytes, so that equal sets are equal strings and a lockState compares with ==.
type lockState struct {
	writer  int
	readers string
}

// has reports whether p is one of the readers.
func (s lockState) has(p int) bool {
	return p >= 0 && p/8 < len(s.readers) && s.readers[p/8]&(1<<(p%8)) != 0
}

// with returns s with p added to or removed from the readers (p >= 0).
func (s lockState) with(p int, in bool) lockState {
	b := []byte(s.readers)
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
	s.readers = string(b)
	return s
}

// members returns the readers in increasing order.
func (s lockState) members() []int {
	var ps []int
	for i := range len(s.readers) * 8 {
		if s.has(i) {
			ps = append(ps, i)
		}
	}
	return ps
}

// lockInput is the input of one operation in the lock model.
type lockInput struct {
	kind    Kind
	shared  bool
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
// and outputs are those of [Operations].
var LockModel = porcupine.Model{
	Init: func() any { return lockState{writer: free} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(lockState), input.(lockInput)
		if in.process < 0 {
			return false, state
		}
		switch {
		case in.kind == Acquire && !in.shared:
			ok := s.writer == free && s.readers == "" && output.(lockOutput).holds == 1
			return ok, lockState{writer: in.process}
		case in.kind == Acquire:
			ok := s.writer == free && !s.has(in.process) && output.(lockOutput).holds == 1
			return ok, s.with(in.process, true)
		case in.kind == Release && !in.shared:
			return s.writer == in.process, lockState{writer: free}
		case in.kind == Release:
			return s.has(in.process), s.with(in.process, false)
		}
		return false, state
	},
	Equal: func(a, b any) bool { return a.(lockState) == b.(lockState) },
	Hash: func(state any) uint64 {
		s := state.(lockState)
		h := fnv.New64a()
		h.Write([]byte{byte(s.writer), byte(s.writer >> 8), byte(s.writer >> 16), byte(s.writer >> 24)})
		h.Write([]byte(s.readers))
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lockInput)
		kind := string(in.kind)
		if in.shared {
			kind += " shared"
		}
		if in.kind == Acquire {
			out := output.(lockOutput)
			return fmt.Sprintf("p%d %s → token %d, holds %d", in.process, kind, out.token, out.holds)
		}
		return fmt.Sprintf("p%d %s", in.process, kind)
	},
	DescribeOperationMetadata: func(info any) string {
		m := info.(opTimes)
		return fmt.Sprintf("called at %s, returned at %s", ms(m.call), ms(m.ret))
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		switch {
		case s.writer != free:
			return fmt.Sprintf("held by p%d", s.writer)
		case s.readers != "":
			var ps []string
			for _, p := range s.members() {
				ps = append(ps, fmt.Sprintf("p%d", p))
			}
			return "shared by " + strings.Join(ps, ", ")
		}
		return "free"
	},
}

// Operations converts ops to porcupine operations of LockModel, with times relative to the
// earliest call (ClientId is the process).
func Operations(ops []Op) []porcupine.Operation {
	origin := origin(ops)
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		out[i] = porcupine.Operation{
			ClientId: op.Process,
			Input:    lockInput{kind: op.Kind, shared: op.Shared, process: op.Process},
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
