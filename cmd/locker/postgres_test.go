package main

import (
	"context"
	"os"
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

	// A nested run re-enters the outer run's hold, finding the database in $LOCKER_HOLDS; another
	// key is free to it, and the outer key held to a run that is not nested.
	inner := os.Args[0] + " " + helperArg + " locker run -n job -c 'echo nested'; " +
		os.Args[0] + " " + helperArg + " locker run -n other -c 'echo other'"
	tio = newIO("", false)
	tio.exec(t, 0, "run", "--postgres", url, "job", "-c", inner)
	if got := tio.stdout.String(); got != "nested\nother\n" {
		t.Fatalf("nested runs: stdout %q\nstderr:\n%s", got, tio.stderr)
	}

	tio = newIO("", false)
	tio.exec(t, 0, "bench", "--postgres", url, "--time", "20ms", "--scenario", "floor,uncontended,contention-separate")
	shown := strings.Replace(url, "sslmode=disable", "sslmode=xxxxx", 1)
	for _, want := range []string{"postgres: PostgreSQL at " + shown, "uncontended           postgres", "floor                 postgres", "contention-separate   postgres"} {
		if out := tio.stdout.String(); !strings.Contains(out, want) {
			t.Errorf("bench --postgres: stdout lacks %q:\n%s", want, out)
		}
	}
	if out := tio.stdout.String(); strings.Contains(out, "goredis") || strings.Contains(out, "miniredis") {
		t.Errorf("bench --postgres alone ran Redis drivers:\n%s", out)
	}
	tio = newIO("", false)
	tio.exec(t, 2, "bench", "--driver", "postgres")

	// A database that refuses the password: the error shows the URL redacted.
	secret := strings.Replace(url, "postgres@", "postgres:s3cretpw@", 1)
	secret = strings.Replace(secret, srv.Addr, freeAddr(t), 1)
	tio = newIO("", false)
	run([]string{"inspect", "--postgres", secret, "k"}, tio.streams)
	checkNoSecret(t, "inspect --postgres", tio.stdout.String()+tio.stderr.String())
	if !strings.Contains(tio.stderr.String(), "postgres://postgres:xxxxx@") {
		t.Errorf("stderr %q: want the URL, redacted", tio.stderr)
	}
}

// A PostgreSQL URL shows its user name, not its password nor its query values.
func TestRedactPostgres(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{"postgres://app@db:5432/app", "postgres://app@db:5432/app"},
		{"postgres://app:hunter2@db/app", "postgres://app:xxxxx@db/app"},
		{"postgresql://db/app?password=s3cretpw&sslmode=require", "postgresql://db/app?password=xxxxx&sslmode=xxxxx"},
		{"host=db password=qsecret", invalidURL},
		{"postgres://app:hunter2@db:port/app", invalidURL},
	} {
		got := redactPostgres(tc.raw)
		if got != tc.want {
			t.Errorf("redactPostgres(%q) = %q, want %q", tc.raw, got, tc.want)
		}
		checkNoSecret(t, "redactPostgres", got)
	}
}

// A nested run gets the outer run's database without any password.
func TestPostgresID(t *testing.T) {
	t.Parallel()
	got := postgresID("postgres://app:hunter2@db:5433/app?password=s3cretpw&sslmode=require&sslpassword=qsecret#x")
	if want := "postgres://app@db:5433/app?sslmode=require"; got != want {
		t.Errorf("postgresID = %q, want %q", got, want)
	}
	checkNoSecret(t, "postgresID", got)
}
