package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker/internal/testkit/redistest"
)

// A testCA is a certificate authority of a test, with its certificate in a PEM file.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	file   string // the CA's certificate, PEM
	dir    string
	serial int64
}

// newTestCA makes a CA whose certificate is in a file of t's temporary directory.
func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca := &testCA{dir: t.TempDir()}
	ca.key = newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "locker test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.file = ca.writePEM(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// writePEM writes one PEM block to the file name of the CA's directory and returns its path.
func (ca *testCA) writePEM(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue makes a certificate signed by the CA, for a server (for 127.0.0.1 if ip, and the
// dnsNames) or, with client, for a client; it returns it and the paths of its certificate and
// key files.
func (ca *testCA) issue(t *testing.T, client, ip bool, dnsNames ...string) (cert tls.Certificate, certFile, keyFile string) {
	t.Helper()
	ca.serial++
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial + 1), Subject: pkix.Name{CommonName: "locker test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: dnsNames,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	if ip {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(t.TempDir()) // a fresh name per certificate
	certFile = ca.writePEM(t, name+".pem", "CERTIFICATE", der)
	keyFile = ca.writePEM(t, name+".key", "EC PRIVATE KEY", keyDER)
	if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	return cert, certFile, keyFile
}

// startTLSProxy listens with TLS (cfg) on a loopback port and passes each connection, once its
// handshake is done, to the plain server at backend; delay holds every handshake back that long.
// It returns the proxy's address; it stops with the test.
func startTLSProxy(t *testing.T, backend string, cfg *tls.Config, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			c.Close()
			return false
		}
		conns = append(conns, c)
		return true
	}
	conns = []net.Conn{}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !track(c) {
				return
			}
			wg.Go(func() {
				if delay > 0 {
					time.Sleep(delay) // the server is slow to answer: what the test is about
				}
				tc := tls.Server(c, cfg)
				if tc.Handshake() != nil {
					c.Close()
					return
				}
				b, err := net.Dial("tcp", backend)
				if err != nil || !track(b) {
					c.Close()
					return
				}
				wg.Go(func() { io.Copy(b, tc); b.Close() })
				io.Copy(tc, b)
				c.Close()
			})
		}
	})
	return ln.Addr().String()
}

// tlsSetup is a redis-server (the default user's password hunter2, and an ACL user alice with
// the password alicepw), a CA, and TLS proxies to the server.
type tlsSetup struct {
	plain      string // the server's address, without TLS
	proxy      string // TLS with a certificate for 127.0.0.1 (not localhost) signed by ca
	clientAuth string // the same, and it wants a client certificate signed by ca
	ca         *testCA
	clientCert string // a client certificate signed by ca, and its key
	clientKey  string
	alicePW    string // a file with alice's password
}

func newTLSSetup(t *testing.T) *tlsSetup {
	t.Helper()
	srv := redistest.StartServer(t)
	srv.Do(t, "ACL", "SETUSER", "alice", "on", ">alicepw", "~*", "&*", "+@all")
	srv.Do(t, "CONFIG", "SET", "requirepass", "hunter2")
	s := &tlsSetup{plain: srv.Addr, ca: newTestCA(t)}
	serverCert, _, _ := s.ca.issue(t, false, true)
	_, s.clientCert, s.clientKey = s.ca.issue(t, true, false)
	s.proxy = startTLSProxy(t, s.plain, &tls.Config{Certificates: []tls.Certificate{serverCert}}, 0)
	pool := x509.NewCertPool()
	pool.AddCert(s.ca.cert)
	s.clientAuth = startTLSProxy(t, s.plain, &tls.Config{Certificates: []tls.Certificate{serverCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}, 0)
	s.alicePW = filepath.Join(t.TempDir(), "alice")
	if err := os.WriteFile(s.alicePW, []byte("alicepw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// localhost is addr (127.0.0.1:port) with the name localhost, which the proxies' certificate
// does not hold.
func localhost(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return "localhost:" + port
}

// A TLS handshake that fails is reported within 2 s, on every driver, as a TLS error that says
// what to do: a plain server behind rediss://, a certificate of an unknown CA, a certificate for
// another name, a server that wants a client certificate.
func TestTLSHandshakeErrors(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"plain server", []string{"--redis", "rediss://:hunter2@" + s.plain},
			[]string{"TLS handshake with " + s.plain + " failed: the server speaks plain Redis, not TLS; use redis://"}},
		{"unknown CA", []string{"--redis", "rediss://:hunter2@" + s.proxy},
			[]string{"TLS handshake with " + s.proxy + " failed: ", "certificate signed by unknown authority", "--redis-ca FILE"}},
		{"another name", []string{"--redis", "rediss://:hunter2@" + localhost(s.proxy), "--redis-ca", s.ca.file},
			[]string{"TLS handshake with " + localhost(s.proxy) + " failed: ", "wanted to match localhost", "a name the certificate holds (127.0.0.1)"}},
		{"no client certificate", []string{"--redis", "rediss://:hunter2@" + s.clientAuth, "--redis-ca", s.ca.file},
			[]string{"TLS handshake with " + s.clientAuth + " failed: ", "certificate required", "--redis-cert FILE --redis-key FILE"}},
	} {
		for _, d := range drivers {
			t.Run(tc.name+"/"+d, func(t *testing.T) {
				t.Parallel()
				tio := newIO("", false)
				args := append([]string{"inspect", "--driver", d, "k"}, tc.args...)
				start := time.Now()
				tio.exec(t, exitUnavailable, args...)
				elapsed := time.Since(start)
				t.Logf("%s: failed in %v", d, elapsed)
				if elapsed > 2*time.Second {
					t.Errorf("locker %q: failed after %v, want within 2s", args, elapsed)
				}
				for _, w := range tc.want {
					if !strings.Contains(tio.stderr.String(), w) {
						t.Errorf("locker %q: stderr lacks %q:\n%s", args, w, tio.stderr)
					}
				}
				checkNoSecret(t, "a TLS error", tio.stderr.String())
			})
		}
	}
}

// rediss:// verifies the server's certificate unless told not to; the CA comes from --redis-ca
// or ?ca_file=; skip_verify works on every driver, with a warning; a client certificate comes
// from --redis-cert and --redis-key, or the query.
func TestTLSVerify(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	const warning = "locker inspect: warning: TLS certificate verification is off for "
	q := url.Values{"cert_file": {s.clientCert}, "key_file": {s.clientKey}, "ca_file": {s.ca.file}}.Encode()
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"--redis-ca", []string{"--redis", "rediss://:hunter2@" + s.proxy, "--redis-ca", s.ca.file}, false},
		{"ca_file", []string{"--redis", "rediss://:hunter2@" + s.proxy + "?ca_file=" + url.QueryEscape(s.ca.file)}, false},
		{"skip_verify", []string{"--redis", "rediss://:hunter2@" + localhost(s.proxy) + "?skip_verify=true"}, true},
		{"skip_verify trailing slash", []string{"--redis", "rediss://:hunter2@" + s.proxy + "/?skip_verify=true"}, true},
		{"--redis-insecure-skip-verify", []string{"--redis", "rediss://:hunter2@" + s.proxy, "--redis-insecure-skip-verify"}, true},
		{"--redis-cert", []string{"--redis", "rediss://:hunter2@" + s.clientAuth, "--redis-ca", s.ca.file, "--redis-cert", s.clientCert, "--redis-key", s.clientKey}, false},
		{"cert_file", []string{"--redis", "rediss://:hunter2@" + s.clientAuth + "?" + q}, false},
	} {
		for _, d := range drivers {
			t.Run(tc.name+"/"+d, func(t *testing.T) {
				t.Parallel()
				tio := newIO("", false)
				tio.exec(t, 0, append([]string{"inspect", "--driver", d, "k"}, tc.args...)...)
				if got, want := tio.stdout.String(), "key k: free\n"; got != want {
					t.Errorf("stdout %q, want %q", got, want)
				}
				if got := strings.Contains(tio.stderr.String(), warning); got != tc.warn {
					t.Errorf("stderr %q: a warning that verification is off: %v, want %v", tio.stderr, got, tc.warn)
				}
				checkNoSecret(t, "the warning", tio.stderr.String())
			})
		}
	}
}

// A TLS server that is slow to answer (after checkTLS asked whether it speaks plain Redis) is not
// taken for a plain one: the handshake goes on. The time of a handshake on loopback, against
// which plainProbeAfter is set, is logged.
func TestTLSSlowServer(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	serverCert, _, _ := s.ca.issue(t, false, true)
	slow := startTLSProxy(t, s.plain, &tls.Config{Certificates: []tls.Certificate{serverCert}}, 2*plainProbeAfter)
	cfg := &tls.Config{InsecureSkipVerify: true}
	start := time.Now()
	if err := checkTLS(context.Background(), slow, cfg); err != nil {
		t.Errorf("checkTLS with a server that answers after %v: %v", 2*plainProbeAfter, err)
	}
	t.Logf("a handshake with a server that waits %v: %v", 2*plainProbeAfter, time.Since(start))

	var worst time.Duration
	for range 20 {
		start := time.Now()
		if err := checkTLS(context.Background(), s.proxy, cfg); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(start))
	}
	t.Logf("20 handshakes on loopback: the slowest took %v (plainProbeAfter %v)", worst, plainProbeAfter)

	// A plain server: errNotTLS, in a *tlsError.
	start = time.Now()
	err := checkTLS(context.Background(), s.plain, cfg)
	if te, ok := asError[*tlsError](err); !ok || !errors.Is(err, errNotTLS) || te.addr != s.plain {
		t.Errorf("checkTLS with a plain server: %v, want a *tlsError for %s with errNotTLS", err, s.plain)
	}
	t.Logf("a plain server found out in %v", time.Since(start))

	// A server that never answers: checkTLS ends with its ctx, which is not a TLS error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*plainProbeAfter)
	defer cancel()
	err = checkTLS(ctx, ln.Addr().String(), cfg)
	if _, ok := asError[*tlsError](err); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("checkTLS with a server that never answers: %v, want the ctx's deadline", err)
	}
}

// bench connects as the other commands do: the TLS flags, and a TLS error at once.
func TestBenchTLS(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	tio := newIO("", false)
	tio.exec(t, 0, "bench", "--redis", "rediss://:hunter2@"+s.proxy+"/2", "--redis-ca", s.ca.file,
		"--driver", "goredis,rueidis,redigo", "--scenario", "uncontended", "--time", "5ms")
	for _, d := range []string{"goredis", "rueidis", "redigo"} {
		if !strings.Contains(tio.stdout.String(), d) {
			t.Errorf("bench over TLS: no result of %s:\n%s", d, tio.stdout)
		}
	}
	tio = newIO("", false)
	start := time.Now()
	tio.exec(t, exitUnavailable, "bench", "--redis", "rediss://:hunter2@"+s.plain, "--driver", "goredis", "--time", "5ms")
	if elapsed := time.Since(start); elapsed > 2*time.Second || !strings.Contains(tio.stderr.String(), "the server speaks plain Redis, not TLS") {
		t.Errorf("bench with rediss:// to a plain server: after %v, stderr:\n%s", elapsed, tio.stderr)
	}
}

// demo over TLS without verification warns, as the other commands do.
func TestDemoTLSWarns(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	tio := newIO("", false)
	url := "rediss://:hunter2@" + s.proxy + "/4?skip_verify=true"
	tio.exec(t, 0, append(demoArgs, "--redis", url, "--driver", "rueidis")...)
	if want := "locker demo: warning: TLS certificate verification is off for rediss://:xxxxx@" + s.proxy + "/4?skip_verify=xxxxx"; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tio.stderr)
	}
	checkDemo(t, tio.stdout.String(), "backend: Redis at rediss://:xxxxx@"+s.proxy+"/4?skip_verify=xxxxx, driver rueidis")
}
