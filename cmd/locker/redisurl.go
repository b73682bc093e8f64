package main

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A redisURL is a --redis URL as locker reads it, once, for every driver: each driver's client
// is built from these fields, never from the URL, so that one URL means the same on goredis,
// rueidis, redigo and valkey.
type redisURL struct {
	raw      string // as given (with its secrets: show it through redactURL only)
	tls      bool   // rediss://
	host     string // without brackets; the name TLS verifies
	port     string // "6379" by default
	user     string // an ACL user, or "" for the default user
	password string
	db       int    // the path's number: "", "/" and "/0" are 0
	name     string // ?client_name=: CLIENT SETNAME
	tlsOpts  tlsOptions
}

// The query options of a Redis URL (urlOptions, in this order in messages); any other is a
// usage error. client_name is go-redis's and rueidis's; skip_verify theirs too; ca_file,
// cert_file and key_file are the --redis-ca, --redis-cert and --redis-key of this URL.
const (
	optClientName = "client_name"
	optSkipVerify = "skip_verify"
	optCAFile     = "ca_file"
	optCertFile   = "cert_file"
	optKeyFile    = "key_file"
)

var urlOptions = []string{optClientName, optSkipVerify, optCAFile, optCertFile, optKeyFile}

// urlForm is how a usage error shows the form of a Redis URL.
const urlForm = "redis://[[user:]password@]host[:port][/db][?option=value&…] or rediss://… (TLS)"

// parseRedisURL reads the Redis URL raw, with the password pw (from --redis-password-file or
// $LOCKER_REDIS_PASSWORD; "" for none) for a URL that carries none. The user information means
// what it means to redis-cli: "user:password@" is an ACL user and its password, ":password@" and
// "password@" the default user's password; except that with pw, "user@" is the user of pw. The
// port is 6379 by default; the path is the database, 0 by default ("", "/", "/0"). A URL that is
// not of this form, or that has a query option locker does not know, is a *usageError that
// shows neither the password nor the query's values.
func parseRedisURL(raw, pw string) (*redisURL, error) {
	if u, err := url.Parse(raw); err != nil || u.Scheme != "redis" && u.Scheme != "rediss" {
		if fixed := redactURL("redis://" + raw); !strings.Contains(raw, "://") && fixed != invalidURL {
			// host:port, as redis-cli -h and the drivers' Addr take it.
			return nil, usagef("--redis: the URL lacks its scheme: want %s (or rediss:// for TLS)", fixed)
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Hostname() == "" {
		return nil, usagef("--redis: want %s, got %s", urlForm, quotedURL(raw))
	}
	r := &redisURL{raw: raw, tls: u.Scheme == "rediss", host: u.Hostname(), port: u.Port(), password: pw}
	if r.port == "" {
		r.port = "6379"
	}
	if n, err := strconv.Atoi(r.port); err != nil || n < 1 || n > 65535 {
		return nil, usagef("--redis %s: the port must be a number from 1 to 65535", quotedURL(raw))
	}
	if u.User != nil {
		name := u.User.Username()
		switch p, _ := u.User.Password(); {
		case p != "":
			r.user, r.password = name, p
		case pw != "":
			r.user = name
		default:
			r.password = name // redis-cli and Redigo: a name alone is the password
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || strings.HasPrefix(db, "+") {
			return nil, usagef("--redis %s: the path is the database, a number (redis://host:6379/2), not %q", quotedURL(raw), u.Path)
		}
		r.db = n
	}
	if u.Fragment != "" {
		return nil, usagef("--redis %s: a Redis URL has no #fragment", quotedURL(raw))
	}
	if err := r.readQuery(u.RawQuery); err != nil {
		return nil, err
	}
	return r, nil
}

// readQuery sets r's options from the query q. An option that locker does not know is a usage
// error that names it (its value, which may be a secret, is not shown); so is a word without
// "=" (which may itself be a secret, so it is not shown either) and an option given twice.
func (r *redisURL) readQuery(q string) error {
	if q == "" {
		return nil
	}
	seen := map[string]bool{}
	var unknown []string
	for part := range strings.SplitSeq(q, "&") {
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if !ok || err != nil {
			return usagef("--redis %s: a query option without a value (not shown: it may be a secret); the options are %s=value", quotedURL(r.raw), strings.Join(urlOptions, ", "))
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return usagef("--redis %s: option %s: its value does not unescape", quotedURL(r.raw), strconv.Quote(key))
		}
		if !slices.Contains(urlOptions, key) {
			unknown = append(unknown, strconv.Quote(key))
			continue
		}
		if seen[key] {
			return usagef("--redis %s: option %s given twice", quotedURL(r.raw), key)
		}
		seen[key] = true
		switch key {
		case optClientName:
			r.name = val
		case optSkipVerify:
			b, err := strconv.ParseBool(val)
			if val == "" {
				b, err = true, nil // ?skip_verify= as go-redis and rueidis read it
			}
			if err != nil {
				return usagef("--redis %s: %s=%s: want true or false", quotedURL(r.raw), key, secretMask)
			}
			r.tlsOpts.skipVerify = b
		case optCAFile:
			r.tlsOpts.caFile = val
		case optCertFile:
			r.tlsOpts.certFile = val
		case optKeyFile:
			r.tlsOpts.keyFile = val
		}
	}
	if len(unknown) > 0 {
		return usagef("--redis %s: unknown query option %s: locker knows %s (see --help)", quotedURL(r.raw), strings.Join(unknown, ", "), strings.Join(urlOptions, ", "))
	}
	return nil
}

// addr is r's host:port, for dialing.
func (r *redisURL) addr() string { return net.JoinHostPort(r.host, r.port) }

// canonical is r as a URL that go-redis's ParseURL reads as locker does (bench.Redis reads it
// so): the password explicit, the database in the path, client_name the only option; the TLS
// options are not in it. It holds the password: never show it.
func (r *redisURL) canonical() string {
	u := url.URL{Scheme: "redis", Host: r.addr(), Path: "/" + strconv.Itoa(r.db)}
	if r.tls {
		u.Scheme = "rediss"
	}
	if r.user != "" || r.password != "" {
		u.User = url.UserPassword(r.user, r.password)
	}
	if r.name != "" {
		u.RawQuery = url.Values{optClientName: {r.name}}.Encode()
	}
	return u.String()
}

// String is r's URL for people: redactURL's.
func (r *redisURL) String() string { return redactURL(r.raw) }

// describe is what r means, for tests: "rediss host:port db 2 user \"alice\"", without the password.
func (r *redisURL) describe() string {
	scheme := "redis"
	if r.tls {
		scheme = "rediss"
	}
	return fmt.Sprintf("%s %s db %d user %q", scheme, r.addr(), r.db, r.user)
}
