package rediscore

import (
	_ "embed"
	"strings"
)

// libLua is lua/lib.lua, the library of the scripts: what a lock and its wait queue are, in one
// place. No script runs it whole: each carries the definitions it uses (libFor).
//
//go:embed lua/lib.lua
var libLua string

// libFor returns the part of lua/lib.lua that source needs: in the library's order, each of its
// top-level definitions (a "local function" or a "local" constant, with the comment lines right
// above it; the first one's is the library's opening comment) that source uses, directly or
// through another.
// Redis runs a script's whole text at every call, and Lua 5.1 makes a closure for every local
// function it passes, so a definition a script never calls costs each call time: renew.lua, which
// uses two of the 21, ran 27% faster without the rest. "Uses" means that the definition's name
// appears as a word in code, comments left out: a string or a field of the same name may add a
// definition that is not needed, never leave out one that is.
func libFor(source string) string {
	defs := libDefs
	need := make([]bool, len(defs))
	var visit func(code string)
	visit = func(code string) {
		for i, d := range defs {
			if !need[i] && usesName(code, d.name) {
				need[i] = true
				visit(d.code)
			}
		}
	}
	visit(luaCode(source))
	var b strings.Builder
	for i, d := range defs {
		if need[i] {
			b.WriteString(d.text)
		}
	}
	return b.String()
}

// libDefs are the top-level definitions of lua/lib.lua, split once for every script.
var libDefs = libDefinitions(libLua)

// A libDefinition is one top-level definition of lua/lib.lua.
type libDefinition struct {
	name string // the local it defines
	text string // its lines, with the comment lines right above it
	code string // text without comments
}

// libDefinitions splits lib at its top-level definitions: each starts at a line "local ..." (a
// line without indentation), with the comment lines right above it, and runs to the next one.
func libDefinitions(lib string) []libDefinition {
	lines := strings.SplitAfter(lib, "\n")
	var starts []int // the first line of each definition, its comment included
	for i, line := range lines {
		if strings.HasPrefix(line, "local ") {
			start := i
			for start > 0 && strings.HasPrefix(lines[start-1], "--") {
				start--
			}
			starts = append(starts, start)
		}
	}
	defs := make([]libDefinition, len(starts))
	for k, start := range starts {
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		text := strings.Join(lines[start:end], "")
		code := luaCode(text)
		name := strings.TrimPrefix(strings.TrimSpace(code), "local ")
		name = strings.TrimPrefix(name, "function ")
		if i := strings.IndexFunc(name, func(r rune) bool { return !isNameChar(r) }); i >= 0 {
			name = name[:i]
		}
		defs[k] = libDefinition{name: name, text: text, code: code}
	}
	return defs
}

// luaCode returns text without its comments ("--" to the end of a line; the scripts have no
// "--" in strings, nor long comments).
func luaCode(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] + "\n"
		}
		b.WriteString(line)
	}
	return b.String()
}

// usesName reports whether name appears in code as a whole word.
func usesName(code, name string) bool {
	for i := 0; ; {
		j := strings.Index(code[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		before := j == 0 || !isNameChar(rune(code[j-1]))
		after := end == len(code) || !isNameChar(rune(code[end]))
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isNameChar(r rune) bool {
	return r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}
