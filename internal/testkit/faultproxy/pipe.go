package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

const (
	chunkSize  = 32 << 10 // most bytes read at once
	queueDepth = 64       // chunks read but not yet forwarded, per direction
)

// chunk is the bytes of one Read, due to be forwarded at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe forwards src to dst (client to server when up) with two goroutines,
// counted by wg: a reader, so bytes keep being read while earlier ones wait
// out their latency, and a writer, so order is kept.
func (l *link) pipe(wg *sync.WaitGroup, src, dst net.Conn, up bool) {
	q := make(chan chunk, queueDepth)
	wg.Add(2)
	go func() {
		defer wg.Done()
		l.read(src, q, up)
	}()
	go func() {
		defer wg.Done()
		l.write(dst, q, up)
	}()
}

// read reads src into q until EOF (then closes q) or an error (then aborts
// the link). Server bytes arriving while a reply is being dropped are thrown
// away here, as soon as they are read, and the server's EOF or error then
// only wakes the drop, which resets the link itself.
func (l *link) read(src net.Conn, q chan<- chunk, up bool) {
	defer close(q)
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !up && l.dropping.Load() {
				l.gotReply()
			} else {
				c := chunk{data: bytes.Clone(buf[:n]), due: time.Now().Add(l.p.latency())}
				select {
				case q <- c:
				case <-l.done:
					return
				}
			}
		}
		if err != nil {
			if !up && l.dropping.Load() {
				l.gotReply() // the server hung up: the drop resets the link
				return
			}
			if !errors.Is(err, io.EOF) {
				l.shut(true) // pass an RST on, and end the link
			}
			return
		}
	}
}

// write forwards the chunks in q to dst, each when it is due and as the
// faults on at that moment decide, and passes on the EOF when q closes.
func (l *link) write(dst net.Conn, q <-chan chunk, up bool) {
	for {
		var c chunk
		var ok bool
		select {
		case c, ok = <-q:
		case <-l.done:
			return
		}
		if !ok {
			l.closeWrite(dst, up)
			return
		}
		if !l.wait(c.due) {
			return
		}
		switch l.p.judge(c.data, up) {
		case discard:
			continue
		case dropReply:
			l.dropReply(dst, c.data)
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			l.shut(true)
			return
		}
	}
}

// wait waits until due, reporting false if the link is shut first.
func (l *link) wait(due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

// closeWrite passes a half-close on to dst, unless the link is shut, a
// reply is being dropped (the drop resets the client instead) or a black
// hole swallows it.
func (l *link) closeWrite(dst net.Conn, up bool) {
	select {
	case <-l.done:
		return
	default:
	}
	if (!up && l.dropping.Load()) || l.p.blackholed() {
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// dropReply writes data to the server, waits (at most replyWait) for the
// first byte of the reply, which the reader throws away, counts the drop and
// aborts the link, so the client never sees the reply.
func (l *link) dropReply(server net.Conn, data []byte) {
	l.dropping.Store(true) // before the write: no reply byte can get past
	if _, err := server.Write(data); err != nil {
		l.shut(true)
		return
	}
	t := time.NewTimer(replyWait)
	defer t.Stop()
	select {
	case <-l.replied:
	case <-t.C:
	case <-l.done:
	}
	l.p.countDrop()
	l.shut(true)
}
