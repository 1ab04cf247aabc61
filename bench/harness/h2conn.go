package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// shouldRateLimit is the full method name Envoy calls.
const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// recvWindow is the flow-control window the load generator gives the
// server, for the connection and for every stream: large enough that the
// server never waits for a window update, so the rows measure answering,
// not flow control.
const recvWindow = 1 << 30

// handshakeTimeout bounds the wait for the server's first SETTINGS.
const handshakeTimeout = 5 * time.Second

// maxStreamID is the largest stream id a client may open (RFC 9113,
// section 5.1.1): ids are never reused, so a connection opens at most
// about a billion streams, hours of calls at the rates measured here.
const maxStreamID = 1<<31 - 1

// errConnection is what a connection's failures wrap: the connection can
// carry no more calls, and the run that saw it measured nothing.
var errConnection = errors.New("HTTP/2 connection failed")

// h2Conn is one plaintext HTTP/2 connection (prior knowledge, no TLS, as
// the limiter's gRPC listener speaks) of the load generator, with what
// outlives a run: the server's settings, both flow-control windows, the
// HPACK decoder's table and the next stream id.
//
// One goroutine at a time drives it (see loop): it reads frames, answers
// what the protocol asks for, and starts a call for every call that ends,
// collecting the frames it sends in out and writing them in one syscall
// once everything already read is handled, as wrk's event loop does.
type h2Conn struct {
	nc  net.Conn
	br  *bufio.Reader
	out bytes.Buffer // frames not yet written to nc
	fr  *http2.Framer
	dec *hpack.Decoder

	// The calls: one HPACK header block (the same for every call) and
	// the framed requests, shared by every connection of a load.
	block      []byte
	requests   [][]byte
	maxRequest int // the length of the longest request
	rng        *rand.Rand
	base       time.Time // latencies are told from monotonic nanoseconds since base

	// window is the flow-control window given to the server (recvWindow,
	// smaller in tests), and connUnacked what it has sent on the
	// connection since the last window update.
	window      uint32
	connUnacked uint32

	// What the server allows: streams open at once, each new stream's
	// send window and the largest frame, and what is left of the
	// connection's send window.
	maxStreams   uint32
	streamWindow int64
	maxFrame     uint32
	sendWindow   int64

	// The open streams, in slots indexed by stream id (see openStream).
	slots  []stream
	open   int
	nextID uint32

	// blk is the header block being decoded: HEADERS and its
	// CONTINUATIONs, whose fields onField collects, each read into
	// headerBuf.
	blk       headerBlock
	headerBuf []byte

	// resp is where sampled answers are decoded, reused.
	resp rlsv3.RateLimitResponse

	// err is the failure that ended the connection, returned by every
	// later run.
	err error
}

// stream is one call in flight: when it was issued, and what of its
// answer has arrived.
type stream struct {
	id      uint32 // 0: the slot is free
	issued  int64  // since the connection's base, ns
	sample  bool   // decode the answer in full
	status  string // the answer's :status
	size    int    // bytes of DATA received
	prefix  [grpcPrefixLen]byte
	body    []byte // the whole body, kept for sampled calls only
	unacked uint32 // bytes received since the stream's last window update
}

// headerBlock is what the load generator reads from a header block: the
// stream it is on, whether it ends the stream, and the fields that tell
// how the call went.
type headerBlock struct {
	stream        uint32
	endStream     bool
	status        string
	grpcStatus    string
	hasGRPCStatus bool
	grpcMessage   string
}

// dialH2 connects to addr, sends the client preface and settings, and
// waits for the server's settings: calls may start when it returns.
func dialH2(ctx context.Context, addr string, window uint32, block []byte, requests [][]byte, base time.Time, seed uint64) (*h2Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConnection, err)
	}
	c := &h2Conn{
		nc:           nc,
		br:           bufio.NewReaderSize(nc, 64<<10),
		block:        block,
		requests:     requests,
		maxRequest:   maxLen(requests),
		rng:          rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		base:         base,
		window:       window,
		maxStreams:   ^uint32(0), // unlimited until the server says otherwise
		streamWindow: 65535,      // the protocol's initial windows
		sendWindow:   65535,
		maxFrame:     16384,
		nextID:       1,
	}
	c.fr = http2.NewFramer(&c.out, c.br)
	c.fr.SetReuseFrames()
	c.dec = hpack.NewDecoder(4096, c.onField) // the protocol's default table size, which the settings keep
	if err := c.handshake(ctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

// handshake sends the preface, the settings and the connection's window,
// then reads the server's first frame, which must be its SETTINGS, and
// acknowledges it.
func (c *h2Conn) handshake(ctx context.Context) error {
	c.out.WriteString(http2.ClientPreface)
	settings := []http2.Setting{
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: c.window},
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		return fmt.Errorf("%w: %w", errConnection, err)
	}
	if c.window > 65535 {
		if err := c.fr.WriteWindowUpdate(0, c.window-65535); err != nil {
			return fmt.Errorf("%w: %w", errConnection, err)
		}
	}
	if err := c.flush(); err != nil {
		return err
	}
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("%w: %w", errConnection, err)
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return fmt.Errorf("%w: no HTTP/2 settings from the server (is it gRPC without TLS?): %w", errConnection, err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("%w: the server opened with %v, not its SETTINGS", errConnection, f.Header())
	}
	if err := c.settings(sf); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	if err := c.nc.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("%w: %w", errConnection, err)
	}
	return nil
}

// settings takes the server's settings into use and acknowledges them.
func (c *h2Conn) settings(f *http2.SettingsFrame) error {
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = s.Val
		case http2.SettingInitialWindowSize:
			c.streamWindow = int64(s.Val)
		case http2.SettingMaxFrameSize:
			c.maxFrame = s.Val
		}
		return nil
	})
	if err == nil {
		err = c.fr.WriteSettingsAck()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errConnection, err)
	}
	return nil
}

// flush writes the frames collected in out.
func (c *h2Conn) flush() error {
	if c.out.Len() == 0 {
		return nil
	}
	_, err := c.nc.Write(c.out.Bytes())
	c.out.Reset()
	if err != nil {
		return fmt.Errorf("%w: %w", errConnection, err)
	}
	return nil
}

// now is the monotonic time since the connection's base, in ns.
func (c *h2Conn) now() int64 { return int64(time.Since(c.base)) }

// reserve makes room for inFlight streams open at once: slots are twice
// as many as that, a power of two, so openStream finds a free one after
// a step or two. It is called between runs, with no stream open.
func (c *h2Conn) reserve(inFlight int) {
	n := 16
	for n < 2*inFlight {
		n *= 2
	}
	if n > len(c.slots) {
		c.slots = make([]stream, n)
	}
}

// slot is where stream id lives if it is open.
func (c *h2Conn) slot(id uint32) *stream {
	return &c.slots[int(id>>1)&(len(c.slots)-1)]
}

// stream is the open stream id, or nil (a stream already ended, or
// never opened).
func (c *h2Conn) stream(id uint32) *stream {
	s := c.slot(id)
	if id == 0 || s.id != id {
		return nil
	}
	return s
}

// canOpen tells whether a call can start now: the server allows another
// stream and the connection's window holds any request.
func (c *h2Conn) canOpen() bool {
	return uint32(c.open) < c.maxStreams && c.sendWindow >= int64(c.maxRequest)
}

func maxLen(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n = max(n, len(b))
	}
	return n
}

// openStream starts a call issued at issued: a HEADERS frame of the
// shared header block and one DATA frame of a random request that ends
// the stream, both added to out. A stream's slot is picked by its id;
// when the slot of the next id is still taken (a call much slower than
// those after it), that id is skipped, which the protocol allows, as
// ids need only increase.
func (c *h2Conn) openStream(issued int64, sample bool) error {
	req := c.requests[c.rng.IntN(len(c.requests))]
	if int64(len(req)) > c.streamWindow || uint32(len(req)) > c.maxFrame {
		return fmt.Errorf("%w: a %d-byte request does not fit the server's stream window (%d) or frame size (%d)",
			errConnection, len(req), c.streamWindow, c.maxFrame)
	}
	id := c.nextID
	for c.slot(id).id != 0 {
		id += 2
	}
	if id > maxStreamID {
		return fmt.Errorf("%w: every stream id is used; a new connection is needed", errConnection)
	}
	c.nextID = id + 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block, EndHeaders: true}); err != nil {
		return fmt.Errorf("%w: %w", errConnection, err)
	}
	if err := c.fr.WriteData(id, true, req); err != nil {
		return fmt.Errorf("%w: %w", errConnection, err)
	}
	c.sendWindow -= int64(len(req))
	s := c.slot(id)
	*s = stream{id: id, issued: issued, sample: sample, body: s.body[:0]}
	c.open++
	return nil
}

// close ends the connection.
func (c *h2Conn) close() error { return c.nc.Close() }

// requestHeaderBlock is the HPACK header block of every ShouldRateLimit
// call to authority. It is encoded once and sent as it is, so it must not
// depend on the state of the server's decoding table: it begins by
// setting that table's size to 0, and its fields are either in the static
// table or literals the server does not add to its table.
func requestHeaderBlock(authority string) ([]byte, error) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.SetMaxDynamicTableSizeLimit(0)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: shouldRateLimit},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	} {
		if err := enc.WriteField(f); err != nil {
			return nil, fmt.Errorf("encoding the request headers: %w", err)
		}
	}
	return buf.Bytes(), nil
}
