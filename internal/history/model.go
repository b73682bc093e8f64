package history

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// free is the lock model's state when no process holds the lock; otherwise the state is the
// holding process.
const free = -1

// lockInput is the input of one operation in the lock model.
type lockInput struct {
	kind    Kind
	process int
}

// lockOutput is what an acquire reported (a release reports nothing).
type lockOutput struct {
	token uint64
	holds int
}

// LockModel is the sequential specification of one lock, for porcupine: the state is the holding
// process, or free. An acquire by p is legal only when the lock is free and reports one hold (it
// is a fresh lock, not a re-entry), and then p holds it; a release by p is legal only when p
// holds it, and then it is free. Inputs and outputs are those of [Operations].
var LockModel = porcupine.Model{
	Init: func() any { return free },
	Step: func(state, input, output any) (bool, any) {
		holder, in := state.(int), input.(lockInput)
		switch in.kind {
		case Acquire:
			return holder == free && output.(lockOutput).holds == 1, in.process
		case Release:
			return holder == in.process, free
		}
		return false, state
	},
	Equal: func(a, b any) bool { return a.(int) == b.(int) },
	Hash:  func(state any) uint64 { return uint64(state.(int) + 1) },
	DescribeOperation: func(input, output any) string {
		in := input.(lockInput)
		if in.kind == Acquire {
			out := output.(lockOutput)
			return fmt.Sprintf("p%d acquire → token %d, holds %d", in.process, out.token, out.holds)
		}
		return fmt.Sprintf("p%d release", in.process)
	},
	DescribeOperationMetadata: func(info any) string {
		m := info.(opTimes)
		return fmt.Sprintf("called at %s, returned at %s", ms(m.call), ms(m.ret))
	},
	DescribeState: func(state any) string {
		if h := state.(int); h != free {
			return fmt.Sprintf("held by p%d", h)
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
			Input:    lockInput{kind: op.Kind, process: op.Process},
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
