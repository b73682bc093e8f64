// Package compare benchmarks the locker module side by side with the Redis locks people pick
// instead — github.com/bsm/redislock, github.com/go-redsync/redsync/v4 and
// github.com/redis/rueidis/rueidislock — on one redis-server, with the scenarios of package
// github.com/hashlock/locker/bench.
//
// It is a module of its own (bench/compare/go.mod) so that these libraries never become
// dependencies of the locker module: a user of locker downloads none of them. Run it from this
// directory:
//
//	go test -run '^$' -bench . -benchmem
//
// The benchmarks are in compare_test.go; this file only documents the package.
package compare
