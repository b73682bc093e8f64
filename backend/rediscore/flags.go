package rediscore

// A flagSet is the scripts' flags argument for every combination of its letters, made once, so
// that no call builds a string.
type flagSet []string

// newFlagSet returns the flag set of letters (a few: it has 2^len(letters) entries).
func newFlagSet(letters string) flagSet {
	s := make(flagSet, 1<<len(letters))
	for i := range s {
		for j := range len(letters) {
			if i&(1<<j) != 0 {
				s[i] += letters[j : j+1]
			}
		}
	}
	return s
}

// of returns the letters whose condition holds, in the order of the set's letters.
func (s flagSet) of(conds ...bool) string {
	i := 0
	for j, c := range conds {
		if c {
			i |= 1 << j
		}
	}
	return s[i]
}
