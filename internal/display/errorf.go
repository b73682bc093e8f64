package display

import (
	"fmt"
	"strings"
)

// pkgPrefix starts the message of every error the locker package declares (ErrNotHeld is
// "locker: lock not held").
const pkgPrefix = "locker: "

// Errorf is fmt.Errorf for errors that wrap the locker package's errors: the result wraps
// the same errors (errors.Is and errors.As see them), but its message shows each wrapped
// error without its leading "locker: ", so that a chain of layers names the package once:
// "locker: unlock "k": goredis: release: lock not held", not "…: release: locker: lock not
// held". Every error argument is shown so, whatever its verb, but one that the message starts
// with ("%w; gave up"); the rest formats as fmt.Errorf does.
func Errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if !strings.Contains(format, "%w") {
		return err
	}
	shown := make([]any, len(args))
	for i, a := range args {
		// An error the message starts with keeps its prefix: it is the package's name there.
		if e, ok := a.(error); ok && e != nil && (i > 0 || !strings.HasPrefix(format, "%")) {
			a = strings.TrimPrefix(e.Error(), pkgPrefix)
		}
		shown[i] = a
	}
	return &wrapped{msg: fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), shown...), err: err}
}

// wrapped is an error with its own message that unwraps to what fmt.Errorf wrapped.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }

// Unwrap returns the errors that the %w verbs wrapped.
func (w *wrapped) Unwrap() []error {
	switch u := w.err.(type) {
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	case interface{ Unwrap() error }:
		return []error{u.Unwrap()}
	}
	return nil
}
