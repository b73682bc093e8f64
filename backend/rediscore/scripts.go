package rediscore

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// A Script is one of the canonical Lua scripts. Adapters wrap Source in their driver's script
// object, which runs EVALSHA with SHA1 and falls back to EVAL when the server answers NOSCRIPT.
type Script struct {
	Name   string // file name without .lua, for errors
	Source string // the Lua text: what the script's file uses of lua/lib.lua, then the file
	SHA1   string // hex SHA1 of Source, as EVALSHA wants it
}

// newScript makes the script name from its file's source, with the definitions of lua/lib.lua
// that it uses (libFor) at the line libHere, or before the whole file when it has none.
func newScript(name, source string) *Script {
	head, tail := splitAtLib(source)
	source = head + libFor(tail) + tail
	sum := sha1.Sum([]byte(source))
	return &Script{Name: name, Source: source, SHA1: hex.EncodeToString(sum[:])}
}

// libHere is the line of a script's file after which its library definitions go. What comes
// before it is a fast path that runs without them: Lua creates a closure for every local
// function it passes, and a call that returns before the library creates none. The fast path uses
// no definition of lua/lib.lua (it writes the marks' values as they are there).
const libHere = "-- lib.lua: the definitions used below come here.\n"

// splitAtLib splits a script's file after its line libHere: head is "" when it has none.
func splitAtLib(source string) (head, tail string) {
	if i := strings.Index(source, libHere); i >= 0 {
		return source[:i+len(libHere)], source[i+len(libHere):]
	}
	return "", source
}
