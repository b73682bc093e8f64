package redislock

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// transientReplies are the Redis error replies of a server that will answer again soon: loading
// its data, a replica promoted or demoted (failover), a cluster reconfiguring, a script running.
var transientReplies = []string{"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ", "BUSY ", "NOREPLICAS "}

// Unavailable reports whether a driver error means that the server could not be reached or
// could not answer for now, so that the same call may succeed later: a network error (refused,
// reset, broken pipe, timeout, EOF) or one of the transient error replies. Errors such as NOPERM,
// WRONGTYPE or a script error are not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return true
	}
	msg := err.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
