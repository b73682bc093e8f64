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
// and, for what an uncontended Lock+Unlock costs on CPU — the client's, the server's, in
// scripts, in commands — per library side by side (Linux; about 30s):
//
//	go test -run TestCost -v -count=1 .
//
// The benchmarks are in compare_test.go, TestCost in cost_test.go; this file only documents
// the package.
package compare
