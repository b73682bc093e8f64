package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
)

// redisClient is a plain go-redis client on the server at url, closed with the test.
func redisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// inspect and unlock --force report a key that is not a lock in one line, exit 1, and leave it
// as it is: a list, and a hash that locker did not write.
func TestNotALock(t *testing.T) {
	t.Parallel()
	onEachServer(t, func(t *testing.T, url string) {
		rdb := redisClient(t, url)
		ctx := context.Background()
		if err := rdb.RPush(ctx, "mylist", "x").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, "myhash", "field", "1").Err(); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"mylist", "myhash"} {
			for _, args := range [][]string{
				{"inspect", "--redis", url, key},
				{"inspect", "--redis", url, "--json", key},
				{"unlock", "--redis", url, "--force", "--yes", key},
				{"unlock", "--redis", url, "--force", key}, // at a terminal: no question either
			} {
				tio := newIO("y\n", true)
				tio.exec(t, 1, args...)
				want := "locker " + args[0] + ": key " + key + " is not a lock (it holds another type of value, or a hash that locker did not write), so locker leaves it alone\n"
				if got := tio.stderr.String(); got != want {
					t.Errorf("locker %q: stderr %q, want %q", args, got, want)
				}
				if tio.stdout.String() != "" {
					t.Errorf("locker %q: stdout %q, want nothing", args, tio.stdout)
				}
			}
		}
		if got, err := rdb.LRange(ctx, "mylist", 0, -1).Result(); err != nil || len(got) != 1 || got[0] != "x" {
			t.Errorf("the list after unlock --force: %q, %v; want [x]", got, err)
		}
		if got, err := rdb.HGetAll(ctx, "myhash").Result(); err != nil || len(got) != 1 || got["field"] != "1" {
			t.Errorf("the hash after unlock --force: %v, %v; want field=1", got, err)
		}
	})
}

// A quorum starts with a minority of its servers down (warning about each) and counts them
// when they come back; with a majority down it fails; the same server twice is refused.
func TestQuorumStart(t *testing.T) {
	t.Parallel()
	up1, up2 := startMiniredis(t), startMiniredis(t)
	downURL, down2URL := "redis://"+freeAddr(t), "redis://"+freeAddr(t)

	lib := libClient(t, up1)
	lease := lockKey(t, lib, "job")
	defer lease.Unlock()

	for _, driver := range drivers {
		tio := newIO("", false)
		tio.exec(t, 0, "inspect", "--driver", driver, "--redis", up1, "--redis", downURL, "--redis", up2, "job")
		if got := tio.stderr.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "locker inspect: warning: "+downURL+": ") ||
			!strings.HasSuffix(got, "; going on with the majority that answered\n") {
			t.Errorf("%s, one server down: stderr %q, want one warning naming it", driver, got)
		}
		// Only up1 holds "job": not a majority of the three, so the quorum reports it free.
		if got, want := tio.stdout.String(), "key job: free\n"; got != want {
			t.Errorf("%s, one server down: stdout %q, want %q", driver, got, want)
		}

		tio = newIO("", false)
		tio.exec(t, exitUnavailable, "inspect", "--driver", driver, "--redis", downURL, "--redis", up1, "--redis", down2URL, "job")
		if want := "locker inspect: a quorum of 3 servers needs 2, 1 answered: "; !strings.HasPrefix(tio.stderr.String(), want) {
			t.Errorf("%s, two servers down: stderr %q, want it to start with %q", driver, tio.stderr, want)
		}
	}

	// The same server: by another name, another database, or with credentials.
	host := strings.TrimPrefix(up1, "redis://")
	_, port, _ := net.SplitHostPort(host)
	for _, same := range []string{up1, up1 + "/3", "redis://localhost:" + port, "redis://u:secret@" + host} {
		tio := newIO("", false)
		tio.exec(t, 2, "inspect", "--redis", up1, "--redis", up2, "--redis", same, "job")
		if want := "the same server (127.0.0.1:" + port + ") twice"; !strings.Contains(tio.stderr.String(), want) {
			t.Errorf("--redis %s after %s: stderr %q lacks %q", same, up1, tio.stderr, want)
		}
		if strings.Contains(tio.stderr.String(), "secret") {
			t.Errorf("--redis %s: the password is printed: %q", same, tio.stderr)
		}
	}
}

// A quorum node down at the start is used once its server answers: a lock taken then is on
// all three.
func TestQuorumNodeComesBack(t *testing.T) {
	t.Parallel()
	up1, up2 := startMiniredis(t), startMiniredis(t)
	addr := freeAddr(t)
	cf := &connFlags{urls: urlList{up1, up2, "redis://" + addr}, driver: "goredis"}
	cn, err := cf.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cn.close()
	if len(cn.down) != 1 {
		t.Fatalf("down = %q, want the one server", cn.down)
	}
	third := startMiniredisAt(t, addr)
	client := locker.New(cn.Locker)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The node tries its server again at most once per redialEvery: lock and unlock until the
	// third server has the lock too.
	for {
		lease, err := client.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		held := third.Exists("job")
		if err := lease.Unlock(); err != nil {
			t.Fatal(err)
		}
		if held {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the third server never got the lock")
		case <-time.After(redialEvery / 4):
		}
	}
}

// freeAddr returns a loopback address where nobody listens (a port just closed).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A lazy node's call returns when its ctx ends, even while the dial it started hangs; the dial's
// connection is used by a later call.
func TestLazyNodeCallBoundedByCtx(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	url := startMiniredis(t)
	n := &lazyNode{url: "redis://test", lastErr: errors.New("down at the start"), dial: func(ctx context.Context) (*conn, error) {
		<-release // a server that accepts and never answers
		return (&connFlags{urls: urlList{url}, driver: "goredis"}).connect(ctx)
	}}
	defer n.close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	inspected := make(chan error, 1)
	go func() {
		_, err := n.Inspect(ctx, "k")
		inspected <- err
	}()
	select {
	case err := <-inspected:
		if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Inspect while the dial hangs = %v, want ErrUnavailable and DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("Inspect with a 50ms ctx still waits for the dial after 5s")
	}
	close(release)
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := n.Inspect(context.Background(), "k")
		if err == nil {
			if st.Locked {
				t.Fatalf("Inspect of a free key: %+v", st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never used its dialed connection: %v", err)
		}
		time.Sleep(redialEvery / 10) // a poll: the dial finishes in the background
	}
}
