package fastlane

import (
	"context"
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
	// flushAt is how much the answers to pipelined requests may fill
	// before they are written without waiting for the last of them.
	flushAt = 16 << 10
	// deadlineSlack is how far a deadline may drift before it is set
	// again: setting one on every request costs more than the lane saves
	// elsewhere, and a timeout a second early changes nothing.
	deadlineSlack = time.Second
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

	// buf[start:end] holds what was read and not yet served.
	buf        []byte
	start, end int
	// out holds answers not yet written.
	out []byte
	w   responseWriter

	readDeadline, writeDeadline time.Time
}

// newConn registers c, accepted on s's listener; nil when s is shutting
// down.
func (s *Server) newConn(rwc net.Conn, serverCtx context.Context) *conn {
	ctx, cancel := context.WithCancel(context.WithValue(serverCtx, http.LocalAddrContextKey, rwc.LocalAddr()))
	c := &conn{srv: s, rwc: rwc, ctx: ctx, cancel: cancel, buf: make([]byte, bufferSize)}
	c.state.Store(stateIdle)
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
			// The answers to the requests before the one that panicked
			// are complete: net/http would have sent them already.
			c.flush()
		}
		c.cancel()
		if !handedOff {
			c.rwc.Close()
		}
		c.srv.forget(c)
	}()
	for {
		n, ok := c.readHead()
		if !ok {
			return
		}
		if n == 0 || !c.serveHead(c.buf[c.start:c.start+n]) {
			// Not the lane's: the connection, from this request on, is
			// Fallback's. The answers to the requests before it go first.
			if !c.flush() {
				return
			}
			c.rwc.SetDeadline(time.Time{}) // Fallback sets its own
			handedOff = c.srv.handOff(c.rwc, c.buf[c.start:c.end])
			return
		}
		c.start += n
		// closeAfter includes a shutdown under way when the answer was
		// made, so the answer said Connection: close if the connection
		// ends here. One that begins later finds it idle and closes it.
		closing := c.w.closeAfter
		if closing || c.start == c.end || len(c.out) >= flushAt {
			if !c.flush() || closing {
				return
			}
		}
	}
}

// readHead reads until buf[start:] holds a whole request head, and returns
// its length; 0 when what was read cannot be the head of a request the
// lane serves (too long for the buffer, or lines ended by a bare LF),
// which hands the connection to Fallback. ok is false when the connection
// closed, failed, timed out, or Shutdown closed it.
func (c *conn) readHead() (n int, ok bool) {
	var headerDeadline time.Time
	for {
		if c.start < c.end {
			n, bareLF := headLength(c.buf[c.start:c.end])
			if n > 0 {
				return n, true
			}
			if bareLF {
				return 0, true
			}
			if c.end == len(c.buf) {
				if c.start == 0 {
					return 0, true // longer than the lane reads
				}
				c.end = copy(c.buf, c.buf[c.start:c.end])
				c.start = 0
			}
			// Part of a head: the rest has ReadHeaderTimeout.
			if headerDeadline.IsZero() {
				if d := c.srv.readHeaderTimeout(); d > 0 {
					headerDeadline = time.Now().Add(d)
					if c.readDeadline.IsZero() || c.readDeadline.After(headerDeadline) {
						c.setReadDeadline(headerDeadline)
					}
				}
			}
		} else {
			c.start, c.end = 0, 0
			if !c.state.CompareAndSwap(stateActive, stateIdle) && c.state.Load() != stateIdle {
				return 0, false // Shutdown closed it
			}
			if d := c.srv.idleTimeout(); d > 0 {
				if want := time.Now().Add(d); c.readDeadline.Before(want.Add(-deadlineSlack)) {
					c.setReadDeadline(want)
				}
			}
		}
		nr, err := c.rwc.Read(c.buf[c.end:])
		if c.state.Load() == stateIdle && nr > 0 && !c.state.CompareAndSwap(stateIdle, stateActive) {
			return 0, false // Shutdown closed it as it woke
		}
		if c.state.Load() == stateClosed {
			return 0, false
		}
		c.end += nr
		if err != nil {
			return 0, false
		}
	}
}

// headLength is the length of the request head at the start of b, through
// the empty line that ends it; 0 when b does not hold all of it. bareLF
// reports a line ended by LF alone, which net/http reads and the lane
// does not.
func headLength(b []byte) (n int, bareLF bool) {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i == 0 || b[i-1] != '\r' {
			return 0, true
		}
		if i >= 3 && b[i-2] == '\n' {
			return i + 1, false
		}
	}
	return 0, false
}

// flush writes the answers not yet written; false when the write failed.
func (c *conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	if d := c.srv.Fallback.WriteTimeout; d > 0 {
		if want := time.Now().Add(d); c.writeDeadline.Before(want.Add(-deadlineSlack)) {
			c.writeDeadline = want
			c.rwc.SetWriteDeadline(want)
		}
	}
	_, err := c.rwc.Write(c.out)
	c.out = c.out[:0]
	return err == nil
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
