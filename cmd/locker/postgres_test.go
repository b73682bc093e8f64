package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// --postgres: run, inspect and unlock on a real PostgreSQL (the tables made at first use), seen
// by a library Client on the same database; a password in the URL is never shown.
func TestPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.URL()

	tio := newIO("", false)
	tio.exec(t, 0, "inspect", "--postgres", url, "invoice:42")
	if got, want := tio.stdout.String(), "key invoice:42: free\n"; got != want {
		t.Fatalf("free key: stdout %q, want %q", got, want)
	}

	pool := srv.Pool(t)
	b := postgres.New(pool)
	t.Cleanup(b.Close)
	lib := locker.New(b, locker.WithTTL(10*time.Second))
	defer lib.Close()
	lease, err := lib.Lock(context.Background(), "invoice:42")
	if err != nil {
		t.Fatal(err)
	}
	tio = newIO("", false)
	tio.exec(t, 0, "inspect", "--postgres", url, "invoice:42")
	if out := tio.stdout.String(); !strings.Contains(out, "locked by") || !strings.Contains(out, "1 hold") {
		t.Fatalf("held key: stdout %q", out)
	}
	tio = newIO("", false)
	tio.exec(t, 0, "unlock", "--postgres", url, "--force", "--yes", "invoice:42")
	if err := lease.Unlock(); err == nil {
		t.Fatal("Unlock after unlock --force: nil, want ErrNotHeld")
	}

	tio = newIO("", false)
	tio.exec(t, 0, "run", "--postgres", url, "-c", "echo ran", "job")
	if got := tio.stdout.String(); got != "ran\n" {
		t.Fatalf("run: stdout %q", got)
	}
	tio = newIO("", false)
	tio.exec(t, 2, "inspect", "--postgres", url, "--redis", "redis://127.0.0.1:1", "k")

	// A database that refuses the password: the error shows the URL redacted.
	secret := strings.Replace(url, "postgres@", "postgres:s3cretpw@", 1)
	secret = strings.Replace(secret, srv.Addr, freeAddr(t), 1)
	tio = newIO("", false)
	run([]string{"inspect", "--postgres", secret, "k"}, tio.streams)
	checkNoSecret(t, "inspect --postgres", tio.stdout.String()+tio.stderr.String())
	if !strings.Contains(tio.stderr.String(), "postgres:xxxxx@") {
		t.Errorf("stderr %q: want the URL, redacted", tio.stderr)
	}
}
