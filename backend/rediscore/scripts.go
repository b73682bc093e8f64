package rediscore

import (
	"crypto/sha1"
	"encoding/hex"
)

// A Script is one of the canonical Lua scripts. Adapters wrap Source in their driver's script
// object, which runs EVALSHA with SHA1 and falls back to EVAL when the server answers NOSCRIPT.
type Script struct {
	Name   string // file name without .lua, for errors
	Source string // the Lua text: what the script's file uses of lua/lib.lua, then the file
	SHA1   string // hex SHA1 of Source, as EVALSHA wants it
}

// newScript makes the script name from its file's source, after the definitions of lua/lib.lua
// that it uses (libFor).
func newScript(name, source string) *Script {
	source = libFor(source) + source
	sum := sha1.Sum([]byte(source))
	return &Script{Name: name, Source: source, SHA1: hex.EncodeToString(sum[:])}
}
