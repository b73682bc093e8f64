// Package faultproxy is a test-only TCP proxy that injects network faults
// between a client and a server on loopback, so tests can check how the lock
// behaves when the network misbehaves. It lives under internal/ and is meant
// to be used only from tests.
//
// Start listens on a free 127.0.0.1 port and forwards every accepted
// connection to a loopback target (for example a redis-server started by
// package redistest). Faults can be switched on and off at any time, and each
// affects connections that are already open as well as new ones:
//
//   - SetLatency delays every chunk of bytes, in both directions.
//   - Blackhole makes bytes vanish in both directions while connections stay
//     open, as in a network partition.
//   - Reset aborts every open connection (both sides see a TCP RST).
//   - DropReplies and DropRepliesTo let a command reach the server, then
//     throw away its reply and reset the client: the server has executed the
//     command but the client never learns its outcome.
//   - Heal ends every fault.
//
// The proxy works on chunks: the bytes returned by one Read from a socket.
// It does not parse any protocol. A client that writes each command (or
// pipeline) with one Write, as Redis clients do, yields one chunk per
// command on loopback, but that is not guaranteed, which matters only for
// DropRepliesTo, whose match is made against a single chunk.
//
// Every goroutine of a proxy ends, and every socket is closed, in the
// t.Cleanup registered by Start; no wait inside the proxy is unbounded once
// it is closed. A Proxy is safe for concurrent use.
package faultproxy
