package main

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
)

// parseRedisURL reads the address, database, user and password, and TLS, the same whatever the
// form; what each driver is given comes from these fields alone.
func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw, pw string
		want    string // describe()
		wantPW  string
	}{
		{"redis://h", "", `redis h:6379 db 0 user ""`, ""},
		{"redis://h:7000", "", `redis h:7000 db 0 user ""`, ""},
		{"redis://h:7000/", "", `redis h:7000 db 0 user ""`, ""},
		{"redis://h:7000/2", "", `redis h:7000 db 2 user ""`, ""},
		{"redis://h:7000/02", "", `redis h:7000 db 2 user ""`, ""},
		{"rediss://h/3", "", `rediss h:6379 db 3 user ""`, ""},
		{"redis://[::1]:6380/1", "", `redis [::1]:6380 db 1 user ""`, ""},
		{"redis://pw@h", "", `redis h:6379 db 0 user ""`, "pw"}, // redis-cli, Redigo
		{"redis://pw:@h", "", `redis h:6379 db 0 user ""`, "pw"},
		{"redis://:pw@h", "", `redis h:6379 db 0 user ""`, "pw"},
		{"redis://alice:pw@h", "", `redis h:6379 db 0 user "alice"`, "pw"},
		{"redis://alice:pw@h", "file", `redis h:6379 db 0 user "alice"`, "pw"}, // the URL's wins
		{"redis://alice@h", "file", `redis h:6379 db 0 user "alice"`, "file"},
		{"redis://h", "file", `redis h:6379 db 0 user ""`, "file"},
		{"redis://al%40ce:p%3Aw@h", "", `redis h:6379 db 0 user "al@ce"`, "p:w"},
		{"rediss://h?skip_verify=true&client_name=x&ca_file=%2Fca.pem", "", `rediss h:6379 db 0 user ""`, ""},
	} {
		r, err := parseRedisURL(tc.raw, tc.pw)
		if err != nil {
			t.Errorf("parseRedisURL(%q): %v", tc.raw, err)
			continue
		}
		if got := r.describe(); got != tc.want || r.password != tc.wantPW {
			t.Errorf("parseRedisURL(%q, %q) = %s, password %q; want %s, password %q", tc.raw, tc.pw, got, r.password, tc.want, tc.wantPW)
		}
	}
	r, err := parseRedisURL("rediss://h/?skip_verify=&ca_file=c&cert_file=x&key_file=y&client_name=n", "")
	if want := (tlsOptions{caFile: "c", certFile: "x", keyFile: "y", skipVerify: true}); err != nil || r.tlsOpts != want || r.name != "n" {
		t.Errorf("query options: %+v, name %q, %v; want %+v, name n", r.tlsOpts, r.name, err, want)
	}
}

// A URL locker cannot read is a usage error that says why without showing its secrets; so is
// a TLS option without TLS, and a client certificate without its key.
func TestRedisURLUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis", "http://hunter2@h"}, `want redis://`},
		{[]string{"--redis", "redis://hunter2@:6379"}, `want redis://`},
		{[]string{"--redis", "redis://hunter2@h/x"}, `the path is the database, a number`},
		{[]string{"--redis", "redis://hunter2@h/1/2"}, `the path is the database`},
		{[]string{"--redis", "redis://hunter2@h:0"}, `the port must be a number from 1 to 65535`},
		{[]string{"--redis", "redis://h?password=hunter2&dial_timeout=s3cretpw"}, `unknown query option "password", "dial_timeout": locker knows client_name, skip_verify, ca_file, cert_file, key_file`},
		{[]string{"--redis", "redis://h?hunter2"}, `a query option without a value (not shown`},
		{[]string{"--redis", "rediss://h?skip_verify=hunter2"}, `skip_verify=xxxxx: want true or false`},
		{[]string{"--redis", "rediss://h?ca_file=a&ca_file=b"}, `option ca_file given twice`},
		{[]string{"--redis", "redis://h#hunter2"}, `no #fragment`},
		{[]string{"--redis", "redis://hunter2@h?ca_file=x"}, `TLS options (--redis-ca, --redis-cert, --redis-key, --redis-insecure-skip-verify, or ?ca_file=…) need a rediss:// URL`},
		{[]string{"--redis", "redis://hunter2@h", "--redis-insecure-skip-verify"}, `need a rediss:// URL`},
		{[]string{"--redis", "rediss://hunter2@h", "--redis-cert", "c.pem"}, `--redis-cert and --redis-key (or ?cert_file= and ?key_file=) go together`},
		{[]string{"--redis", "rediss://hunter2@h", "--redis-ca", "/nonexistent/ca.pem"}, `--redis-ca: open /nonexistent/ca.pem`},
	} {
		for _, d := range drivers {
			tio := newIO("", false)
			args := append([]string{"inspect", "--driver", d, "k"}, tc.args...)
			tio.exec(t, 2, args...)
			if !strings.Contains(tio.stderr.String(), tc.want) {
				t.Errorf("locker %q: stderr lacks %q:\n%s", args, tc.want, tio.stderr)
			}
			checkNoSecret(t, strings.Join(args, " "), tio.stderr.String())
		}
	}
}

// The same URLs reach the same server, database and user, with TLS or not, on every driver: a key
// locked in database 0 and in database 2, by owners labelled db0 and db2, shows the owner of the
// database the URL names. The default user's password is hunter2, alice's alicepw: a URL read
// another way fails to authenticate.
func TestRedisURLOnEveryDriver(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	for _, db := range []string{"0", "2"} {
		lib := libClient(t, "redis://:hunter2@"+s.plain+"/"+db, locker.WithOwnerLabel("db"+db), locker.WithTTL(time.Minute))
		lease := lockKey(t, lib, "which")
		t.Cleanup(func() { lease.Unlock() })
	}
	for _, tc := range []struct {
		args []string
		db   string
	}{
		{[]string{"--redis", "redis://:hunter2@" + s.plain}, "0"},
		{[]string{"--redis", "redis://hunter2@" + s.plain + "/"}, "0"},
		{[]string{"--redis", "redis://hunter2:@" + s.plain + "/0"}, "0"},
		{[]string{"--redis", "redis://alice:alicepw@" + s.plain + "/2"}, "2"},
		{[]string{"--redis", "redis://alice@" + s.plain + "/2", "--redis-password-file", s.alicePW}, "2"},
		{[]string{"--redis", "redis://:hunter2@" + s.plain + "/02?client_name=locker-test"}, "2"},
		{[]string{"--redis", "rediss://alice:alicepw@" + s.proxy + "/2", "--redis-ca", s.ca.file}, "2"},
		{[]string{"--redis", "rediss://hunter2@" + s.proxy + "/?skip_verify=true"}, "0"},
		{[]string{"--redis", "rediss://hunter2@" + localhost(s.proxy) + "/2?skip_verify=1"}, "2"},
	} {
		for _, d := range drivers {
			t.Run("", func(t *testing.T) {
				t.Parallel()
				tio := newIO("", false)
				args := append([]string{"inspect", "--driver", d, "which"}, tc.args...)
				tio.exec(t, 0, args...)
				if want := "key which: locked by db" + tc.db + "#"; !strings.HasPrefix(tio.stdout.String(), want) {
					t.Errorf("locker %q: stdout %q, want %q…", args, tio.stdout, want)
				}
			})
		}
	}
}

// go-redis's and rueidis's options carry the URL's fields and the same TLS configuration
// (Redigo's are functions: TestRedisURLOnEveryDriver shows they apply).
func TestDriverOptions(t *testing.T) {
	t.Parallel()
	r, err := parseRedisURL("rediss://alice:pw@h:7000/3?client_name=n&skip_verify=true", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServerName != "h" || !cfg.InsecureSkipVerify {
		t.Errorf("TLS: ServerName %q, InsecureSkipVerify %v; want h, true", cfg.ServerName, cfg.InsecureSkipVerify)
	}
	g := goredisOptions(r, cfg)
	if g.Addr != "h:7000" || g.Username != "alice" || g.Password != "pw" || g.DB != 3 || g.ClientName != "n" || g.TLSConfig != cfg {
		t.Errorf("go-redis options: %+v", g)
	}
	o := rueidisOptions(r, cfg)
	if len(o.InitAddress) != 1 || o.InitAddress[0] != "h:7000" || o.Username != "alice" || o.Password != "pw" || o.SelectDB != 3 || o.ClientName != "n" || o.TLSConfig != cfg {
		t.Errorf("rueidis options: %+v", o)
	}
	// bench passes r on as a URL, which go-redis reads the same.
	g2, err := redis.ParseURL(r.canonical())
	if err != nil || g2.Addr != g.Addr || g2.Username != g.Username || g2.Password != g.Password || g2.DB != g.DB || g2.ClientName != g.ClientName || g2.TLSConfig == nil {
		t.Errorf("go-redis reads canonical %s as %+v, %v", redactURL(r.canonical()), g2, err)
	}
	r.user, r.password, r.name, r.tls = "", "p@:w", "", false
	if g2, err = redis.ParseURL(r.canonical()); err != nil || g2.Username != "" || g2.Password != "p@:w" || g2.TLSConfig != nil {
		t.Errorf("go-redis reads canonical %s as %+v, %v", redactURL(r.canonical()), g2, err)
	}
}
