package main

import "testing"

// onEachSemServer runs f as a parallel subtest on each server (miniredis, redis-server), with
// the URL of a server of its own.
func onEachSemServer(t *testing.T, f func(t *testing.T, url string)) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			f(t, srv.start(t))
		})
	}
}
