package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one Do call (dial, write and read together) when the
// caller passes a timeout <= 0, and every command Server.Do sends.
const DefaultTimeout = 5 * time.Second

// Error is a Redis error reply, for example "MOVED 3999 127.0.0.1:6381" or
// "ERR unknown command 'FOO'". Do returns it as its error; inside an array
// reply it appears as an element value.
type Error string

func (e Error) Error() string { return string(e) }

// Limits that keep a malformed or hostile reply from exhausting memory.
const (
	maxBulkLen  = 512 << 20 // Redis' own proto-max-bulk-len default
	maxArrayLen = 1 << 24
	maxDepth    = 32
)

// Do sends one command to the Redis server at addr over a fresh TCP connection and reads one
// RESP2 reply: a minimal client for tests that talk to a server directly (SCRIPT FLUSH, DEBUG
// SLEEP, PTTL, CLUSTER ...), with no pooling, pipelining or cluster redirection. Arguments are
// sent as bulk strings. A reply decodes to string (simple or bulk; nil for the null bulk), int64,
// or []any (nil for the null array; nested error replies are Error values); an error reply is
// returned as an Error with a nil reply, and network or protocol failures as other (wrapped)
// errors, so errors.As(err, new(Error)) tells them apart. timeout bounds the whole call;
// <= 0 means DefaultTimeout.
func Do(addr string, timeout time.Duration, args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redistest: Do: no command given")
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("redistest: %s %s: %w", addr, args[0], err)
	}
	defer conn.Close()
	return DoConn(conn, deadline, args...)
}

// DoConn sends one command on conn and reads its reply, as Do does, all before deadline. It
// leaves conn open.
func DoConn(conn net.Conn, deadline time.Time, args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redistest: DoConn: no command given")
	}
	addr := conn.RemoteAddr()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("redistest: %s %s: set deadline: %w", addr, args[0], err)
	}
	if _, err := conn.Write(encodeCommand(args)); err != nil {
		return nil, fmt.Errorf("redistest: %s %s: write: %w", addr, args[0], err)
	}
	v, err := readReply(bufio.NewReader(conn), 0)
	if err != nil {
		return nil, fmt.Errorf("redistest: %s %s: read reply: %w", addr, args[0], err)
	}
	if e, ok := v.(Error); ok {
		return nil, e
	}
	return v, nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args []string) []byte {
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readReply reads one RESP2 reply from r (see Do for the decoding).
func readReply(r *bufio.Reader, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("reply nested too deeply")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return Error(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed integer reply %q", body)
		}
		return n, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxBulkLen {
			return nil, fmt.Errorf("malformed bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, errors.New("bulk string not terminated by CRLF")
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxArrayLen {
			return nil, fmt.Errorf("malformed array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = readReply(r, depth+1); err != nil {
				return nil, err
			}
		}
		return arr, nil
	default:
		return nil, fmt.Errorf("unsupported reply type %q (line %q)", kind, strings.TrimRight(line, "\r\n"))
	}
}
