package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// connRun is one connection's share of a run: what it is asked to do,
// what it measured, and the calls issued but not yet sent.
type connRun struct {
	// Asked: calls to keep in flight; calls to issue in all (0: until
	// stop); decode every sampleEvery-th answer in full, requiring limit
	// when it is not empty.
	inFlight    int
	calls       int
	sampleEvery int
	limit       string
	stop        *atomic.Bool

	// Measured.
	latencies []time.Duration
	errors    int64 // calls that failed
	badAnswer int64 // answers that were not rate-limit answers
	firstErr  error

	// waiting holds the issue times of the calls not yet sent, oldest
	// first, in a ring of inFlight; a call waits while the server allows
	// no more streams or its window is full, and its latency counts from
	// when it was issued, as a blocked client's would.
	waiting        []int64
	head, nWaiting int
	issued         int
	sent           int
	stopping       bool
}

// issue queues a call issued at now, unless the run has issued all it
// was asked to.
func (r *connRun) issue(now int64) {
	if r.calls > 0 && r.issued >= r.calls {
		return
	}
	r.issued++
	r.waiting[(r.head+r.nWaiting)%len(r.waiting)] = now
	r.nWaiting++
}

// failed counts a failed call, keeping the first failure's reason.
func (r *connRun) failed(format string, args ...any) {
	r.errors++
	if r.firstErr == nil {
		r.firstErr = fmt.Errorf(format, args...)
	}
}

// bad counts an answer that is not a rate-limit answer.
func (r *connRun) bad(err error) {
	r.badAnswer++
	if r.firstErr == nil {
		r.firstErr = err
	}
}

// run makes the calls r asks for on c and returns once they are all
// answered: the calls in flight, and no new ones, once r.stop is set. An
// error means the connection failed and every later run fails with it.
func (c *h2Conn) run(r *connRun) error {
	if c.err != nil {
		return c.err
	}
	if err := c.loop(r); err != nil {
		c.err = err
		return err
	}
	return nil
}

// loop is the connection's event loop: send what may be sent, write it
// when nothing read is left to handle, read the next frame, handle it.
func (c *h2Conn) loop(r *connRun) error {
	c.reserve(r.inFlight)
	r.waiting = make([]int64, max(r.inFlight, 1))
	now := c.now()
	for range r.inFlight {
		r.issue(now)
	}
	for {
		if !r.stopping && r.stop.Load() {
			r.stopping = true
			r.nWaiting = 0
		}
		if err := c.startWaiting(r); err != nil {
			return err
		}
		if c.open == 0 && r.nWaiting == 0 {
			return c.flush()
		}
		if c.br.Buffered() == 0 {
			if err := c.flush(); err != nil {
				return err
			}
		}
		if err := c.next(r); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("%w: %d calls still unanswered when the run was over", errConnection, c.open)
			}
			if !errors.Is(err, errConnection) {
				err = fmt.Errorf("%w: %w", errConnection, err)
			}
			return err
		}
	}
}

// next reads the next frame and acts on it. The Framer reads every
// frame's header, checking that header blocks are not interleaved with
// other frames, and the payload of every frame but HEADERS and
// CONTINUATION, which next reads itself into the connection's buffer:
// the Framer would allocate a frame for each, two a call.
func (c *h2Conn) next(r *connRun) error {
	fh, err := c.fr.ReadFrameHeader()
	if err != nil {
		return err
	}
	if fh.Type != http2.FrameHeaders && fh.Type != http2.FrameContinuation {
		f, err := c.fr.ReadFrameForHeader(fh)
		if err != nil {
			return err
		}
		return c.handle(f, r)
	}
	if cap(c.headerBuf) < int(fh.Length) {
		c.headerBuf = make([]byte, fh.Length)
	}
	p := c.headerBuf[:fh.Length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return err
	}
	if fh.Type == http2.FrameHeaders {
		c.blk = headerBlock{stream: fh.StreamID, endStream: fh.Flags.Has(http2.FlagHeadersEndStream)}
		if p, err = headersFragment(fh, p); err != nil {
			return err
		}
	}
	return c.headerFragment(p, fh.Flags.Has(http2.FlagHeadersEndHeaders), r)
}

// headersFragment is the header block fragment in the payload p of a
// HEADERS frame: what is left without its padding and priority.
func headersFragment(fh http2.FrameHeader, p []byte) ([]byte, error) {
	if fh.StreamID == 0 {
		return nil, errors.New("a HEADERS frame on stream 0")
	}
	pad := 0
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			return nil, errors.New("a padded HEADERS frame without its pad length")
		}
		pad, p = int(p[0]), p[1:]
	}
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return nil, errors.New("a HEADERS frame too short for its priority")
		}
		p = p[5:]
	}
	if pad > len(p) {
		return nil, errors.New("a HEADERS frame's padding longer than the frame")
	}
	return p[:len(p)-pad], nil
}

// startWaiting opens a stream for each waiting call, oldest first, as
// long as the server allows.
func (c *h2Conn) startWaiting(r *connRun) error {
	for r.nWaiting > 0 && c.canOpen() {
		if err := c.openStream(r.waiting[r.head], r.sent%r.sampleEvery == 0); err != nil {
			return err
		}
		r.sent++
		r.head = (r.head + 1) % len(r.waiting)
		r.nWaiting--
	}
	return nil
}

// handle acts on a frame from the server other than a header block's.
func (c *h2Conn) handle(f http2.Frame, r *connRun) error {
	var err error
	switch f := f.(type) {
	case *http2.DataFrame:
		err = c.data(f, r)
	case *http2.SettingsFrame:
		if !f.IsAck() {
			err = c.settings(f)
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			err = c.fr.WritePing(true, f.Data)
		}
	case *http2.WindowUpdateFrame:
		// Stream windows matter only for a request's one DATA frame,
		// sent with its HEADERS; later updates of them change nothing.
		if f.StreamID == 0 {
			c.sendWindow += int64(f.Increment)
		}
	case *http2.RSTStreamFrame:
		if s := c.stream(f.StreamID); s != nil {
			r.failed("stream reset by the server: %v", f.ErrCode)
			c.end(s, r)
		}
	case *http2.GoAwayFrame:
		return fmt.Errorf("the server is going away: %v %q", f.ErrCode, f.DebugData())
	case *http2.PushPromiseFrame:
		return errors.New("a server push, though push is disabled")
	}
	return err
}

// data takes a DATA frame: it gives its bytes back to the server's
// windows and keeps what the answer's check needs.
func (c *h2Conn) data(f *http2.DataFrame, r *connRun) error {
	// Padding counts against the windows too.
	n := f.Length
	c.connUnacked += n
	if c.connUnacked >= c.window/2 {
		if err := c.fr.WriteWindowUpdate(0, c.connUnacked); err != nil {
			return err
		}
		c.connUnacked = 0
	}
	s := c.stream(f.StreamID)
	if s == nil {
		return nil
	}
	p := f.Data()
	if s.size < grpcPrefixLen {
		copy(s.prefix[s.size:], p)
	}
	if s.sample {
		s.body = append(s.body, p...)
	}
	s.size += len(p)
	if f.StreamEnded() {
		r.failed("the answer ended without trailers")
		c.end(s, r)
		return nil
	}
	s.unacked += n
	if s.unacked >= c.window/2 {
		if err := c.fr.WriteWindowUpdate(s.id, s.unacked); err != nil {
			return err
		}
		s.unacked = 0
	}
	return nil
}

// headerFragment decodes a fragment of the header block under way, and
// at its end tells its stream what it said. Every block is decoded, even
// of a stream already ended, to keep the decoding table in step with the
// server's.
func (c *h2Conn) headerFragment(p []byte, last bool, r *connRun) error {
	if _, err := c.dec.Write(p); err != nil {
		return fmt.Errorf("decoding the server's headers: %w", err)
	}
	if !last {
		return nil
	}
	if err := c.dec.Close(); err != nil {
		return fmt.Errorf("decoding the server's headers: %w", err)
	}
	s := c.stream(c.blk.stream)
	if s == nil {
		return nil
	}
	if c.blk.status != "" {
		s.status = c.blk.status
	}
	if c.blk.endStream {
		c.answered(s, r)
	}
	return nil
}

// onField is the HPACK decoder's callback: it keeps the fields the load
// generator reads and ignores the others.
func (c *h2Conn) onField(f hpack.HeaderField) {
	switch f.Name {
	case ":status":
		c.blk.status = f.Value
	case "grpc-status":
		c.blk.grpcStatus, c.blk.hasGRPCStatus = f.Value, true
	case "grpc-message":
		c.blk.grpcMessage = f.Value
	}
}

// answered judges a call whose trailers (the header block in c.blk) have
// just ended it: a failure unless HTTP and gRPC both say OK, a bad answer
// unless the body is one message, and for a sampled call unless that
// message is a rate-limit answer.
func (c *h2Conn) answered(s *stream, r *connRun) {
	switch {
	case s.status != "200":
		r.failed("HTTP status %q", s.status)
	case !c.blk.hasGRPCStatus:
		r.failed("no grpc-status in the trailers")
	case c.blk.grpcStatus != "0":
		code := c.blk.grpcStatus
		if n, err := strconv.ParseUint(code, 10, 32); err == nil {
			code = codes.Code(n).String()
		}
		r.failed("%s: %s", code, c.blk.grpcMessage)
	default:
		if err := checkFraming(s.prefix, s.size); err != nil {
			r.bad(err)
		} else if s.sample {
			if err := checkAnswer(s.body[grpcPrefixLen:], &c.resp, r.limit); err != nil {
				r.bad(err)
			}
		}
	}
	c.end(s, r)
}

// end records a call's latency, frees its stream's slot, and issues the
// next call.
func (c *h2Conn) end(s *stream, r *connRun) {
	now := c.now()
	r.latencies = append(r.latencies, time.Duration(now-s.issued))
	s.id = 0
	c.open--
	if !r.stopping {
		r.issue(now)
	}
}
