package goredis

import (
	"context"
	"strings"
	"testing"

	"github.com/hashlock/locker/backend/rediscore"
)

// A script command carries its strings by pointer, but prints them (go-redis hooks, tracing) as
// strings, and routes by its first key as one.
func TestScriptCmdPrintsStrings(t *testing.T) {
	keys, args := []string{"lock:1", "lock:1:locker:req:x{t}"}, []string{"owner", "5000", ""}
	cmd := scriptCmd(context.Background(), rediscore.ReleaseScript, false, keys, args)
	want := "evalsha " + rediscore.ReleaseScript.SHA1 + " 2 lock:1 lock:1:locker:req:x{t} owner 5000 "
	if got := cmd.String(); !strings.HasPrefix(got, want) {
		t.Fatalf("cmd.String() = %q, want it to start with %q", got, want)
	}
	if eval := scriptCmd(context.Background(), rediscore.ReleaseScript, true, keys, args); eval.Args()[1] != any((*arg)(&rediscore.ReleaseScript.Source)) {
		t.Fatalf("EVAL's script argument is %v", eval.Args()[1])
	}
}
