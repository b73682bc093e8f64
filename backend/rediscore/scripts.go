// Package rediscore is the Redis backend of locker, written once for every Redis client: a
// locker.Locker (Backend) that runs the canonical Lua scripts through a small Driver interface,
// with the key and channel layout, release notices over a few shared connections, and replica
// acknowledgement (WithReplicaAck).
//
// Users get a Backend from an adapter of their client — backend/goredis, backend/rueidis,
// backend/redigo — and pass its options from here:
//
//	b := goredis.New(rdb, rediscore.WithReplicaAck(1, time.Second))
//	client := locker.New(b)
//
// To plug any other RESP client, implement Driver (script calls with the NOSCRIPT fallback, a
// pipeline of script calls, WAIT after a script, a pub/sub connection) and pass it to New; the
// adapters of this module are examples of 200 to 300 lines. Run the conformance suite
// (conformance.Run) on the result.
//
// The protocol, whichever driver speaks it:
//
//   - A lock is a hash at the lock's key: field = owner token, value = hold count, and the
//     marker field "" = "locker" (held exclusively) or "locker:shared" (held by readers) that
//     tells a lock from anybody else's hash; the key's TTL is the lease. An exclusive holder
//     that also has shared holds (a downgrade) has the value "<exclusive>:<shared>". Scripts
//     take the key in KEYS, with its companions (request markers, the fencing counter, the wait
//     queue: keys.go), and touch no other key. A key that holds anything else is never
//     written, renewed or deleted, and nor is a companion that holds anything but what the
//     scripts write there: they check every key before they write and answer NOTALOCK
//     (lua/lib.lua, which has the whole layout).
//   - The wait queue (QueueKey) is a hash of waiting owners with their ticket, kind and
//     deadline on the server's clock, for fair locks and for readers and writers that wait
//     (so that they take turns). Only requests that are shared, fair or waiting read it: a
//     plain TryLock costs what it did before the queue existed.
//   - Release notices go to the channel Channel(key), which hashes to the lock's cluster slot:
//     by SPUBLISH where the server has it (Redis >= 7), else by PUBLISH; subscribers use
//     SSUBSCRIBE or SUBSCRIBE to match.
//   - Leases are whole milliseconds, rounded up.
//   - With WithReplicaAck, an acquire, a release or a dequeue is followed by WAIT on the same connection
//     (Driver.EvalWait), and an acquire that too few replicas acknowledged is taken back.
package rediscore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// A Script is one of the canonical Lua scripts. Adapters wrap Source in their driver's script
// object, which runs EVALSHA with SHA1 and falls back to EVAL when the server answers NOSCRIPT.
type Script struct {
	Name   string // file name without .lua, for errors
	Source string // the Lua text: lua/lib.lua, then the script's file
	SHA1   string // hex SHA1 of Source, as EVALSHA wants it
}

// newScript makes the script name from its file's source, after lua/lib.lua.
func newScript(name, source string) *Script {
	source = libLua + source
	sum := sha1.Sum([]byte(source))
	return &Script{Name: name, Source: source, SHA1: hex.EncodeToString(sum[:])}
}

var (
	//go:embed lua/lib.lua
	libLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/raise.lua
	raiseLua string
	//go:embed lua/dequeue.lua
	dequeueLua string
	//go:embed lua/handoff.lua
	handOffLua string
)

// The canonical scripts; their reply formats are in the .lua files.
var (
	AcquireScript = newScript("acquire", acquireLua)
	ReleaseScript = newScript("release", releaseLua)
	RenewScript   = newScript("renew", renewLua)
	InspectScript = newScript("inspect", inspectLua)
	ForceScript   = newScript("force", forceLua)
	RaiseScript   = newScript("raise", raiseLua)
	DequeueScript = newScript("dequeue", dequeueLua)
	HandOffScript = newScript("handoff", handOffLua)
)

// Scripts lists every canonical script.
func Scripts() []*Script {
	return []*Script{AcquireScript, ReleaseScript, RenewScript, InspectScript, ForceScript, RaiseScript, DequeueScript, HandOffScript}
}

// PrepareScripts wraps the source of every canonical script in a driver's script object, for an
// adapter to look up by *Script.
func PrepareScripts[T any](wrap func(source string) T) map[*Script]T {
	m := make(map[*Script]T)
	for _, s := range Scripts() {
		m[s] = wrap(s.Source)
	}
	return m
}
