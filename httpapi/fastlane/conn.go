package fastlane

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"
)

// A lane connection's state, as Shutdown sees it.
const (
	// stateActive: reading a request it has begun to receive, or
	// answering one.
	stateActive int32 = iota
	// stateIdle: waiting for the first byte of the next request.
	stateIdle
	// stateClosed: closed by Shutdown; whatever arrives is dropped.
	stateClosed
)

const (
	// bufferSize is the largest request head the lane reads, and the
	// most it reads at once. A longer head goes to Fallback, whose own
	// limit is larger (MaxHeaderBytes, plus 4 KiB net/http allows beyond).
	bufferSize = 4096
	// deadlineSlack is how far short of the true deadline the one set on
	// the connection may fall before it is set again: setting one on every
	// request costs a good part of what the lane saves. One that expires
	// early is set again, to the true deadline, so none ends a wait early.
	deadlineSlack = time.Second
	// maxKeptBuffer is the most a connection keeps of the space a large
	// answer needed, for the next.
	maxKeptBuffer = 16 << 10
)

// conn is one connection the lane serves.
type conn struct {
	srv    *Server
	rwc    net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	state  atomic.Int32
	// request is what every request's *http.Request starts as: the
	// connection's context, address and protocol.
	request http.Request

	// buf[start:end] holds what was read and not yet served. Of the head
	// at start, buf[:scanned] has been looked at: lines complete up to
	// lineStart, lines of them.
	buf                       []byte
	start, end                int
	scanned, lineStart, lines int
	// out holds the answer being written.
	out []byte
	w   responseWriter

	// served counts the requests answered. Before the first, a head has
	// ReadHeaderTimeout from the accept; after it, the connection waits
	// IdleTimeout from the last answer for 4 bytes of the next request,
	// which then has ReadHeaderTimeout from their arrival, as net/http
	// times them.
	served int
	// firstHeadBy is the first head's deadline; idleSince is when the
	// last answer was written; nextHeadSince, when 4 bytes of the next
	// request had arrived (zero: not yet).
	firstHeadBy, idleSince, nextHeadSince time.Time
	// writeBy is the deadline of the answer in out: WriteTimeout from
	// the moment its request's head was read, as net/http counts it.
	writeBy time.Time
	// The deadlines set on rwc. Each is at most the true one (above) and
	// set again only when it falls short of it by more than
	// deadlineSlack: one that expires early is set again, exactly.
	readDeadline, writeDeadline time.Time
}

// newConn registers c, accepted on s's listener; nil when s is shutting
// down.
func (s *Server) newConn(rwc net.Conn, serverCtx context.Context) *conn {
	ctx, cancel := context.WithCancel(context.WithValue(serverCtx, http.LocalAddrContextKey, rwc.LocalAddr()))
	c := &conn{srv: s, rwc: rwc, ctx: ctx, cancel: cancel, buf: make([]byte, bufferSize)}
	c.state.Store(stateIdle)
	if d := s.readHeaderTimeout(); d > 0 {
		c.firstHeadBy = time.Now().Add(d)
	}
	c.request = *(&http.Request{
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: http.NoBody, RemoteAddr: rwc.RemoteAddr().String(),
	}).WithContext(ctx)
	c.w.header = http.Header{}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		cancel()
		return nil
	}
	s.conns[c] = struct{}{}
	return c
}

// What readHead found.
type headResult int

const (
	// headReady: buf[start:start+n] is a whole head, for the lane to
	// read or refuse.
	headReady headResult = iota
	// headForeign: what is buffered is not a head the lane reads (too
	// long, a line ended by a bare LF, or cut short by the end of the
	// stream): the connection goes to Fallback with it, to answer as it
	// does.
	headForeign
	// connDone: closed, failed, timed out or shut down, with nothing
	// Fallback would answer.
	connDone
)

// serve answers the connection's requests until it closes, fails, idles
// out or sends one the lane does not take, which hands it to Fallback.
func (c *conn) serve() {
	handedOff := false
	defer func() {
		if err := recover(); err != nil {
			if err != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.logf("fastlane: panic serving %v: %v\n%s", c.rwc.RemoteAddr(), err, buf)
			}
			// The answers before the one that panicked were written as
			// they were made, as net/http writes them.
		}
		c.cancel()
		if !handedOff {
			c.rwc.Close()
		}
		c.srv.forget(c)
	}()
	for {
		n, res := c.readHead()
		if res == connDone {
			return
		}
		var r *http.Request
		if res == headReady {
			r, _ = c.readRequest(c.buf[c.start : c.start+n])
		}
		if r == nil {
			// Not the lane's: the connection, from this request on, is
			// Fallback's (the answers before it are written already).
			c.rwc.SetDeadline(time.Time{}) // Fallback sets its own
			handedOff = c.srv.handOff(c.rwc, c.buf[c.start:c.end])
			return
		}
		c.consume(n)
		if !c.answer(r) {
			return
		}
		c.served++
		c.nextHeadSince = time.Time{}
		// closeAfter includes a shutdown under way when the answer was
		// made, so the answer said Connection: close if the connection
		// ends here. One that begins later finds it idle (written, as
		// net/http's are before they turn idle) and closes it.
		if c.w.closeAfter || c.w.endsUnannounced || !c.state.CompareAndSwap(stateActive, stateIdle) {
			return
		}
	}
}

// answer runs the handler on r and writes its answer at once, as net/http
// does. It reports false when the connection must end instead: the answer
// was made after its write deadline, which net/http's write of it would
// have missed, or could not be written.
func (c *conn) answer(r *http.Request) bool {
	c.writeBy = time.Time{}
	if d := c.srv.Fallback.WriteTimeout; d > 0 {
		c.writeBy = time.Now().Add(d)
	}
	c.w.reset(r.Method == http.MethodHead)
	c.w.closeAfter = r.Close
	c.srv.handler().ServeHTTP(&c.w, r)
	if !c.writeBy.IsZero() && time.Now().After(c.writeBy) {
		return false
	}
	c.out = c.w.appendAnswer(c.out[:0], c.srv.closing.Load())
	return c.flush()
}

// readHead reads until buf[start:] holds a whole request head, and
// returns its length with headReady; see headResult for the rest.
func (c *conn) readHead() (n int, res headResult) {
	for {
		// After an answer net/http reads nothing of the next request
		// until 4 bytes of it have come: a stub shorter than that before
		// the stream ends is closed on, not answered.
		whole := c.served == 0 || c.end-c.start >= 4
		if whole && c.served > 0 && c.nextHeadSince.IsZero() {
			c.nextHeadSince = time.Now()
		}
		if whole {
			n, foreign := c.scanHead()
			switch {
			case foreign:
				return 0, headForeign
			case n > 0:
				// Active from here: as net/http's, a connection still
				// reading a head is idle, for Shutdown to close. And as
				// net/http's, it serves no request it finishes reading
				// once a shutdown has begun.
				if !c.state.CompareAndSwap(stateIdle, stateActive) || c.srv.closing.Load() {
					return 0, connDone
				}
				return n, headReady
			}
		}
		if c.end == len(c.buf) {
			if c.start == 0 {
				return 0, headForeign // longer than the lane reads
			}
			c.compact()
		}
		if c.state.Load() != stateIdle {
			return 0, connDone // Shutdown closed it
		}
		by := c.readBy(whole)
		c.armRead(by)
		nr, err := c.rwc.Read(c.buf[c.end:])
		if c.state.Load() == stateClosed {
			return 0, connDone
		}
		c.end += nr
		switch {
		case err == nil:
		case isTimeout(err) && !by.IsZero() && time.Now().Before(by):
			// An early deadline, left from an earlier wait: set the true
			// one and wait on.
			c.setReadDeadline(by)
		case err == io.EOF && c.end > c.start && (c.served == 0 || c.end-c.start >= 4):
			// The stream ends inside a head: net/http answers what it
			// read (a 400) or closes, as it does on its own connections.
			return 0, headForeign
		default:
			return 0, connDone
		}
	}
}

// scanHead reads the lines of the head at buf[start:] that arrived since
// it last looked. n > 0 is the length of the head through its empty
// line; foreign reports a line that already shows the request is not one
// the lane reads (not a GET or HEAD of a path in HTTP/1.1, a header line
// net/http would refuse or the lane does not read, a bare LF), so that
// the connection goes to Fallback when net/http would act on it, not when
// the head ends.
func (c *conn) scanHead() (n int, foreign bool) {
	for c.scanned < c.end {
		i := bytes.IndexByte(c.buf[c.scanned:c.end], '\n')
		if i < 0 {
			c.scanned = c.end
			return 0, false
		}
		i += c.scanned
		c.scanned = i + 1
		if i == c.lineStart || c.buf[i-1] != '\r' {
			return 0, true // a line ended by LF alone
		}
		line := c.buf[c.lineStart : i-1]
		c.lineStart = i + 1
		c.lines++
		switch {
		case c.lines == 1:
			if !plausibleRequestLine(line) {
				return 0, true
			}
		case len(line) == 0:
			return i + 1 - c.start, false
		case !plausibleHeaderLine(line):
			return 0, true
		}
	}
	return 0, false
}

// consume drops the n bytes of the head just served from the buffer.
func (c *conn) consume(n int) {
	c.start += n
	c.scanned, c.lineStart, c.lines = c.start, c.start, 0
	if c.start == c.end {
		c.start, c.end, c.scanned, c.lineStart = 0, 0, 0, 0
	}
}

// compact moves what is buffered to the front of the buffer.
func (c *conn) compact() {
	c.end = copy(c.buf, c.buf[c.start:c.end])
	c.scanned -= c.start
	c.lineStart -= c.start
	c.start = 0
}

// readBy is the deadline of the wait for more of the next head; zero for
// none. whole says the head has begun as net/http counts it (see
// conn.served).
func (c *conn) readBy(whole bool) time.Time {
	switch {
	case c.served == 0:
		return c.firstHeadBy
	case !whole:
		if d := c.srv.idleTimeout(); d > 0 {
			return c.idleSince.Add(d)
		}
	default:
		if d := c.srv.readHeaderTimeout(); d > 0 {
			return c.nextHeadSince.Add(d)
		}
	}
	return time.Time{}
}

// armRead sets rwc's read deadline to by unless the one set is at most by
// and short of it by no more than deadlineSlack.
func (c *conn) armRead(by time.Time) {
	switch {
	case by.IsZero():
		if !c.readDeadline.IsZero() {
			c.setReadDeadline(by)
		}
	case c.readDeadline.IsZero() || c.readDeadline.After(by) || by.Sub(c.readDeadline) > deadlineSlack:
		c.setReadDeadline(by)
	}
}

// isTimeout reports a deadline's expiry.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// flush writes the answer in out; false when the write failed
// or missed its deadline, as net/http's would have.
func (c *conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	by := c.writeBy
	if !by.IsZero() && (c.writeDeadline.IsZero() || c.writeDeadline.After(by) || by.Sub(c.writeDeadline) > deadlineSlack) {
		c.writeDeadline = by
		c.rwc.SetWriteDeadline(by)
	}
	out := c.out
	for {
		n, err := c.rwc.Write(out)
		out = out[n:]
		if err == nil {
			break
		}
		if !isTimeout(err) || by.IsZero() || !time.Now().Before(by) {
			c.out = c.out[:0]
			return false
		}
		c.writeDeadline = by // an early deadline: set the true one
		c.rwc.SetWriteDeadline(by)
	}
	// IdleTimeout counts from here, after the answer is written, as in
	// net/http.
	c.idleSince = time.Now()
	c.out = c.out[:0]
	if cap(c.out) > maxKeptBuffer {
		c.out = nil // a rare large answer: not kept for the connection's life
	}
	return true
}

func (c *conn) setReadDeadline(t time.Time) {
	c.readDeadline = t
	c.rwc.SetReadDeadline(t)
}

// logf logs as Fallback logs its own connections' troubles.
func (c *conn) logf(format string, args ...any) {
	if l := c.srv.Fallback.ErrorLog; l != nil {
		l.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// idleTimeout is how long a connection may wait for its next request, as
// net/http reads its settings.
func (s *Server) idleTimeout() time.Duration {
	if s.Fallback.IdleTimeout != 0 {
		return s.Fallback.IdleTimeout
	}
	return s.Fallback.ReadTimeout
}

// readHeaderTimeout is how long a request head may take to arrive once
// it has begun, as net/http reads its settings.
func (s *Server) readHeaderTimeout() time.Duration {
	if s.Fallback.ReadHeaderTimeout != 0 {
		return s.Fallback.ReadHeaderTimeout
	}
	return s.Fallback.ReadTimeout
}
