package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashlock/locker/internal/testkit/redistest"
)

// redactURL hides the user information (all of it when it may be a password, the password
// only when a user name comes before it), every query value, and any URL it cannot parse.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{"redis://127.0.0.1:6379/2", "redis://127.0.0.1:6379/2"},
		{"redis://hunter2@host", "redis://xxxxx@host"},
		{"redis://hunter2@host:6379/3", "redis://xxxxx@host:6379/3"},
		{"redis://user:pw@host", "redis://user:xxxxx@host"},
		{"redis://:pw@host", "redis://:xxxxx@host"},
		{"redis://user:@host", "redis://xxxxx@host"}, // go-redis and Redigo may take "user" for the password
		{"rediss://host:6380/0?password=pw", "rediss://host:6380/0?password=xxxxx"},
		{"rediss://u:pw@host?protocol=3&password=pw&pw", "rediss://u:xxxxx@host?protocol=xxxxx&password=xxxxx&xxxxx"},
		{"redis://host#pw", "redis://host"},
		{"redis:pw@host", invalidURL},
		{"redis://pw@host:port", invalidURL},
		{"http://u:pw@host", "http://u:xxxxx@host"},
	} {
		got := redactURL(tc.raw)
		if got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.raw, got, tc.want)
		}
		if strings.Contains(got, "pw") || strings.Contains(got, "hunter2") {
			t.Errorf("redactURL(%q) = %q shows the secret", tc.raw, got)
		}
	}
}

// checkNoSecret fails the test if out shows one of the secrets of secretURLs.
func checkNoSecret(t *testing.T, what, out string) {
	t.Helper()
	for _, secret := range []string{"hunter2", "s3cretpw", "qsecret"} {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the secret %q:\n%s", what, secret, out)
		}
	}
}

// The errors of a server that does not answer, and the usage errors of the quorum, show the URLs
// redacted.
func TestCredentialsNotInErrors(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t) // nothing listens there
	for _, tc := range []struct{ url, shown string }{
		{"redis://hunter2@" + addr, "redis://xxxxx@" + addr},
		{"redis://user:s3cretpw@" + addr + "/1", "redis://user:xxxxx@" + addr + "/1"},
		{"redis://:s3cretpw@" + addr, "redis://:xxxxx@" + addr},
		{"rediss://" + addr + "/0?password=qsecret", ""}, // go-redis refuses the option, without its value
		{"redis://hunter2@" + addr + "?dial_timeout=qsecret", ""},
	} {
		for _, d := range drivers {
			cmds := [][]string{{"inspect", "--driver", d, "--redis", tc.url, "k"}}
			if d == "redigo" { // run connects the same way; one driver is enough
				cmds = append(cmds, []string{"run", "--driver", d, "--redis", tc.url, "k", "true"})
			}
			for _, args := range cmds {
				t.Run("", func(t *testing.T) {
					t.Parallel()
					tio := newIO("", false)
					if code := run(args, tio.streams); code == 0 {
						t.Errorf("locker %q: exit 0 with no server", args)
					}
					out := tio.stdout.String() + tio.stderr.String()
					checkNoSecret(t, strings.Join(args, " "), out)
					if tc.shown != "" && !strings.Contains(out, tc.shown) {
						t.Errorf("locker %q: the error lacks the redacted URL %q:\n%s", args, tc.shown, out)
					}
				})
			}
		}
	}

	// A quorum: the same server twice, and servers that are all down.
	tio := newIO("", false)
	tio.exec(t, 2, "inspect", "--redis", "redis://hunter2@"+addr, "--redis", "redis://u:s3cretpw@"+addr+"/2", "--redis", "redis://127.0.0.1:1", "k")
	checkNoSecret(t, "the same server twice", tio.stderr.String())
	if want := "--redis redis://xxxxx@" + addr + " and redis://u:xxxxx@" + addr + "/2: the same server"; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("the same server twice: stderr lacks %q:\n%s", want, tio.stderr)
	}
	tio = newIO("", false)
	tio.exec(t, exitUnavailable, "inspect", "--redis", "redis://hunter2@"+addr, "--redis", "redis://u:s3cretpw@"+freeAddr(t), "--redis", "redis://"+freeAddr(t), "k")
	checkNoSecret(t, "a quorum that is down", tio.stderr.String())
	if want := "redis://xxxxx@" + addr + ": "; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("a quorum that is down: stderr lacks %q:\n%s", want, tio.stderr)
	}

	// A URL that does not parse is not shown at all.
	tio = newIO("", false)
	tio.exec(t, 2, "inspect", "--redis", "redis://hunter2@host:port", "k")
	checkNoSecret(t, "an invalid URL", tio.stderr.String())

	// bench: the server's version is asked first.
	tio = newIO("", false)
	tio.exec(t, exitUnavailable, "bench", "--redis", "redis://hunter2@"+addr, "--driver", "goredis", "--time", "1ms")
	checkNoSecret(t, "bench", tio.stderr.String())
	if want := "redis://xxxxx@" + addr + ": "; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("bench: stderr lacks %q:\n%s", want, tio.stderr)
	}
}

// The header of locker bench and its JSON show the server's URL redacted; the password of a URL
// without one comes from --redis-password-file or $LOCKER_REDIS_PASSWORD.
func TestBenchCredentials(t *testing.T) {
	srv := redistest.StartServer(t) // miniredis has no INFO server, which bench asks first
	srv.Do(t, "CONFIG", "SET", "requirepass", "hunter2")
	addr := srv.Addr
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		env   string // $LOCKER_REDIS_PASSWORD
		shown string
	}{
		{"password-only", []string{"--redis", "redis://:hunter2@" + addr + "/0"}, "", "redis://:xxxxx@" + addr + "/0"},
		{"query", []string{"--redis", "redis://:hunter2@" + addr + "/0?client_name=qsecret"}, "", "redis://:xxxxx@" + addr + "/0?client_name=xxxxx"},
		{"password-file", []string{"--redis", "redis://" + addr, "--redis-password-file", pwFile}, "", "redis://" + addr},
		{"password-env", []string{"--redis", "redis://" + addr}, "hunter2", "redis://" + addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(passwordEnv, tc.env)
			file := filepath.Join(t.TempDir(), "bench.json")
			args := append([]string{"bench", "--driver", "goredis", "--scenario", "uncontended", "--time", "5ms", "--json", file}, tc.args...)
			tio := newIO("", false)
			tio.exec(t, 0, args...)
			out := tio.stdout.String() + tio.stderr.String()
			checkNoSecret(t, "bench's output", out)
			if want := " at " + tc.shown + "\n"; !strings.Contains(out, want) {
				t.Errorf("bench's header lacks %q:\n%s", want, out)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			checkNoSecret(t, "bench's JSON", string(data))
			var report struct{ Server string }
			if err := json.Unmarshal(data, &report); err != nil || report.Server != tc.shown {
				t.Errorf("bench's JSON: server %q (%v), want %q", report.Server, err, tc.shown)
			}
		})
	}
}
