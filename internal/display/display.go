// Package display formats lock keys and owner tokens for messages: errors, logs and the
// locker command's output. A key is quoted and cut to a readable length; an owner token's
// random part, which lets whoever knows it release the lock, is cut to a short prefix.
package display

import (
	"strconv"
	"strings"
)

// MaxKey is the most bytes of a key that a message shows.
const MaxKey = 64

// Key returns key quoted as Go quotes strings; a key over MaxKey bytes is cut there, with the
// number of bytes left out: "aaaa…"+(1000 more bytes).
func Key(key string) string {
	if len(key) <= MaxKey {
		return strconv.Quote(key)
	}
	cut := MaxKey
	for cut > 0 && !startsRune(key[cut]) {
		cut-- // do not split a UTF-8 sequence
	}
	return strconv.Quote(key[:cut]) + "…(" + strconv.Itoa(len(key)-cut) + " more bytes)"
}

// startsRune reports whether b can start a UTF-8 sequence (it is not a continuation byte).
func startsRune(b byte) bool { return b&0xC0 != 0x80 }

// LabelSep separates an owner token's label from its random part: "web-1/4242#9f86d081…".
const LabelSep = '#'

// RandomLen is the length of the random part of the owner tokens that the Client makes: 128
// bits, in hex.
const RandomLen = 32

// shownRandom is how many characters of the random part Owner shows: 32 of its 128 bits,
// enough to tell holders apart, too few to release their lock.
const shownRandom = 8

// Owner returns the owner token for people. A token the Client made, "[label#]<32 hex digits>",
// keeps its label and the first 8 digits of its random part: "web-1/4242#9f86d081…". Any other
// token (set with locker.WithOwner, a deliberately shared identity, not a secret) is shown
// whole, cut after MaxKey bytes. Control characters are escaped.
func Owner(token string) string {
	label, random, ok := SplitOwner(token)
	if !ok {
		if len(token) > MaxKey {
			return quoteControl(token[:MaxKey]) + "…"
		}
		return quoteControl(token)
	}
	shown := random[:shownRandom] + "…"
	if label == "" {
		return shown
	}
	return quoteControl(label) + string(LabelSep) + shown
}

// SplitOwner splits a token the Client made into its label ("" when none) and random part; ok
// is false for any other token.
func SplitOwner(token string) (label, random string, ok bool) {
	if len(token) < RandomLen {
		return "", "", false
	}
	random = token[len(token)-RandomLen:]
	for i := 0; i < len(random); i++ {
		if c := random[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	label = token[:len(token)-RandomLen]
	switch {
	case label == "":
		return "", random, true
	case label[len(label)-1] == LabelSep && len(label) > 1:
		return label[:len(label)-1], random, true
	}
	return "", "", false
}

// quoteControl escapes control characters of s (a terminal escape sequence in an owner label
// must not reach an operator's terminal), leaving printable text as it is.
func quoteControl(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }
