package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// tlsOptions are the TLS settings of a rediss:// URL: its query options, or else the flags
// --redis-ca, --redis-cert, --redis-key and --redis-insecure-skip-verify.
type tlsOptions struct {
	caFile     string // a PEM file of CA certificates trusted besides the system's
	certFile   string // a PEM client certificate, with keyFile
	keyFile    string
	skipVerify bool // no verification of the server's certificate at all
}

// or is o, with each setting that o leaves empty taken from def (the flags).
func (o tlsOptions) or(def tlsOptions) tlsOptions {
	if o.caFile == "" {
		o.caFile = def.caFile
	}
	if o.certFile == "" && o.keyFile == "" {
		o.certFile, o.keyFile = def.certFile, def.keyFile
	}
	o.skipVerify = o.skipVerify || def.skipVerify
	return o
}

// tlsConfig is the TLS configuration of r, whose TLS options are already merged with the flags:
// nil for redis://. It verifies the server's certificate against the system's roots (which
// $SSL_CERT_FILE and $SSL_CERT_DIR replace on Linux and BSDs) and caFile's, for the URL's host
// name, unless skipVerify; it offers certFile and keyFile's certificate to a server that asks.
// A file that does not load is a *usageError, and so is a TLS option on a redis:// URL.
func (r *redisURL) tlsConfig() (*tls.Config, error) {
	o := r.tlsOpts
	if !r.tls {
		if o != (tlsOptions{}) {
			return nil, usagef("--redis %s: TLS options (--redis-ca, --redis-cert, --redis-key, --redis-insecure-skip-verify, or ?ca_file=…) need a rediss:// URL", r)
		}
		return nil, nil
	}
	cfg := &tls.Config{ServerName: r.host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.skipVerify}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, usagef("--redis-ca: %v", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--redis-ca %s: no PEM certificate in it", o.caFile)
		}
		cfg.RootCAs = pool
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return nil, usagef("--redis-cert and --redis-key (or ?cert_file= and ?key_file=) go together")
	}
	if o.certFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, usagef("--redis-cert %s, --redis-key %s: %v", o.certFile, o.keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// insecureWarning is the warning printed for each URL whose certificate locker does not verify.
func insecureWarning(r *redisURL) string {
	return "TLS certificate verification is off for " + r.String() + " (--redis-insecure-skip-verify or ?skip_verify): anyone on the network path can pose as the server"
}

// errNotTLS is the reason of a *tlsError when the server answers in plain Redis, not TLS.
var errNotTLS = errors.New("the server speaks plain Redis, not TLS")

// A tlsError is a failed TLS handshake with a server, with a hint of the fix.
type tlsError struct {
	addr string
	err  error // errNotTLS, a *tls.CertificateVerificationError, a TLS alert, …
	hint string
}

func (e *tlsError) Error() string {
	msg := "TLS handshake with " + e.addr + " failed: " + e.err.Error()
	if e.hint != "" {
		msg += "; " + e.hint
	}
	return msg
}

func (e *tlsError) Unwrap() error { return e.err }

// plainProbeAfter is how long checkTLS waits for the server's first TLS bytes before it asks,
// on another connection, whether the server speaks plain Redis: a plain Redis server never
// answers a TLS ClientHello, so without it a handshake with one would wait for the whole
// connectTimeout. On loopback a TLS server answers within a few milliseconds, even on a loaded
// machine (TestTLSHandshakeTime measures it); a slower one just gets a PING it does not
// understand, and its handshake goes on.
const plainProbeAfter = 300 * time.Millisecond

// checkTLS dials the server at addr and does a TLS handshake with cfg, then hangs up; a failed
// handshake is a *tlsError that says why and how to fix it. The drivers would retry, or wait,
// until ctx ends, and then say only "context deadline exceeded". Errors before the handshake
// (a refused connection) are returned as they are.
func checkTLS(ctx context.Context, addr string, cfg *tls.Config) error {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &firstRead{Conn: raw, read: make(chan struct{})}
	go func() {
		t := time.NewTimer(plainProbeAfter)
		defer t.Stop()
		select {
		case <-t.C:
		case <-w.read: // the server answers: the handshake's own error (if any) says what is wrong
			return
		case <-ctx.Done():
			return
		}
		if plainRedis(ctx, addr) {
			cancel(errNotTLS)
		}
	}()
	tc := tls.Client(w, cfg)
	err = tc.HandshakeContext(ctx)
	if err == nil {
		err = pingTLS(ctx, tc)
	}
	if err == nil {
		return nil
	}
	if errors.Is(context.Cause(ctx), errNotTLS) {
		err = errNotTLS
	} else if ctx.Err() != nil {
		return err // ctx's deadline or cancellation: not the server's doing
	}
	return &tlsError{addr: addr, err: err, hint: tlsHint(err)}
}

// pingTLS sends a PING over tc, whose handshake is done, and reads the first line of the reply.
// With TLS 1.3 the client's handshake ends before the server has checked the client's
// certificate: a server that wants one refuses it here, with an alert ("remote error: tls:
// certificate required"). Whatever the server replies (+PONG, -NOAUTH…) is not checkTLS's
// business, only a failure to read it.
func pingTLS(ctx context.Context, tc *tls.Conn) error {
	stop := context.AfterFunc(ctx, func() { tc.SetDeadline(time.Now()) })
	defer stop()
	if _, err := tc.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	for reply := []byte{}; !strings.Contains(string(reply), "\r\n") && len(reply) < 256; {
		n, err := tc.Read(buf)
		if err != nil {
			return err
		}
		reply = append(reply, buf[:n]...)
	}
	return nil
}

// tlsHint suggests the fix for the handshake error err.
func tlsHint(err error) string {
	var (
		header   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, errNotTLS),
		errors.As(err, &header) && strings.ContainsRune("+-:$*_#,(!=%~>|", rune(header.RecordHeader[0])):
		return "use redis:// for this server, or the port where it speaks TLS (tls-port)"
	case errors.As(err, &unknown):
		return "give the CA that signed the server's certificate with --redis-ca FILE (or ?ca_file=FILE, or $SSL_CERT_FILE), or, for a test server only, --redis-insecure-skip-verify"
	case errors.As(err, &hostname):
		return "connect with a name the certificate holds (" + certNames(hostname.Certificate) + "), or, for a test server only, --redis-insecure-skip-verify"
	case errors.As(err, &invalid):
		return "the certificate is not valid (expired, or not for a server); for a test server only, --redis-insecure-skip-verify"
	case strings.Contains(err.Error(), "certificate required"), strings.Contains(err.Error(), "bad certificate"),
		strings.Contains(err.Error(), "unknown certificate authority"):
		return "the server wants a client certificate it trusts: --redis-cert FILE --redis-key FILE (or ?cert_file=FILE&key_file=FILE)"
	}
	return ""
}

// certNames lists the first names a certificate is for, or says it has none.
func certNames(c *x509.Certificate) string {
	var names []string
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	names = append(names, c.DNSNames...)
	switch {
	case len(names) == 0:
		return "it holds none"
	case len(names) > 4:
		names = append(names[:4], "…")
	}
	return strings.Join(names, ", ")
}

// A firstRead is a net.Conn that closes read when a Read first returns bytes.
type firstRead struct {
	net.Conn
	once sync.Once
	read chan struct{}
}

func (c *firstRead) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.once.Do(func() { close(c.read) })
	}
	return n, err
}

// plainRedis reports whether the server at addr answers a plain PING as Redis does: +PONG, or an
// error such as -NOAUTH or -DENIED. A TLS server answers with an alert, or not at all.
func plainRedis(ctx context.Context, addr string) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	var reply []byte
	buf := make([]byte, 64)
	for len(reply) < 256 && !strings.Contains(string(reply), "\r\n") {
		n, err := c.Read(buf)
		reply = append(reply, buf[:n]...)
		if err != nil {
			break
		}
	}
	return len(reply) > 0 && (reply[0] == '+' || reply[0] == '-') && strings.Contains(string(reply), "\r\n")
}
