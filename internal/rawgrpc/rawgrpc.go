// Package rawgrpc is a bare HTTP/2 client for tests of a gRPC server's
// bounds: it opens gRPC calls whose request never comes (HEADERS without
// a body and without END_STREAM), as many as asked and ignoring the
// server's SETTINGS_MAX_CONCURRENT_STREAMS, sends pings, and counts what
// the server answers: refused streams, each call's final grpc-status, and
// GOAWAY. gRPC's own client cannot do this: it waits for a free stream
// when the server's limit is reached, and sends a unary call's request
// with its headers.
//
// Only test binaries link it.
package rawgrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// Counts are what the server has answered on a connection so far.
type Counts struct {
	// Refused is the streams reset with REFUSED_STREAM, Reset those reset
	// with any other code; a stream reset twice (gRPC may reset one at
	// its deadline and again as it ends the call) counts once.
	Refused, Reset int
	// Status counts the calls ended by trailers, by their grpc-status.
	Status map[codes.Code]int
	// GoAway is the code of the server's last GOAWAY and GoAwayDebug its
	// debug data; GoAways counts them (a graceful close sends two).
	GoAways     int
	GoAway      http2.ErrCode
	GoAwayDebug string
	// Closed is set once reading failed: the server closed the
	// connection (or it broke); ReadErr says how.
	Closed  bool
	ReadErr error
}

// Conn is one HTTP/2 connection with prior knowledge (plaintext, no
// upgrade), as a gRPC server's listener speaks it.
type Conn struct {
	nc   net.Conn
	addr string

	wmu  sync.Mutex // guards what writes: bw, fr's writes, enc, hbuf, nextID
	bw   *bufio.Writer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	// nextID is the id of the next stream opened: odd, from 1.
	nextID uint32

	mu      sync.Mutex
	counts  Counts
	changed chan struct{}             // closed and replaced whenever counts change
	acks    map[[8]byte]chan struct{} // closed when the PING is acknowledged
	reset   map[uint32]bool           // the streams the server has reset
	pings   uint64                    // the data of the last PING of Ping
}

// Dial connects to addr, sends the client preface and empty SETTINGS,
// and reads the server's frames in the background until Close.
func Dial(addr string) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		nc: nc, addr: addr, bw: bufio.NewWriterSize(nc, 64<<10), nextID: 1,
		counts:  Counts{Status: map[codes.Code]int{}},
		changed: make(chan struct{}),
		acks:    map[[8]byte]chan struct{}{},
		reset:   map[uint32]bool{},
	}
	c.fr = http2.NewFramer(c.bw, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.wmu.Lock()
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings()
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		nc.Close()
		return nil, err
	}
	go c.read()
	return c, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Open starts n calls of method (a full name, "/package.Service/Method")
// whose request never comes: a HEADERS frame each, with no body and
// without END_STREAM, written at once whatever the server's limit on
// streams. Each call has header's fields (name, value) beside gRPC's
// own, grpc-timeout for one. It returns once they are written.
func (c *Conn) Open(method string, n int, header ...[2]string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	fields := append([][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", c.addr},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	}, header...)
	for range n {
		c.hbuf.Reset()
		for _, f := range fields {
			if err := c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
				return err
			}
		}
		err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: c.nextID, BlockFragment: c.hbuf.Bytes(), EndHeaders: true})
		if err != nil {
			return err
		}
		c.nextID += 2
	}
	return c.bw.Flush()
}

// Ping sends a PING and waits for its ACK. The server handles a
// connection's frames in order, so once Ping returns it has read every
// frame sent before, the HEADERS of Open's calls included.
func (c *Conn) Ping(ctx context.Context) error {
	c.mu.Lock()
	c.pings++
	var data [8]byte
	binary.BigEndian.PutUint64(data[:], c.pings)
	ack := make(chan struct{})
	c.acks[data] = ack
	c.mu.Unlock()
	if err := c.SendPing(data); err != nil {
		return err
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no ACK of a PING: %w (%+v)", ctx.Err(), c.Counts())
	}
}

// SendPing sends a PING with data and does not wait for its ACK.
func (c *Conn) SendPing(data [8]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.fr.WritePing(false, data); err != nil {
		return err
	}
	return c.bw.Flush()
}

// Counts returns what the server has answered so far.
func (c *Conn) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.countsLocked()
}

func (c *Conn) countsLocked() Counts {
	out := c.counts
	out.Status = make(map[codes.Code]int, len(c.counts.Status))
	for k, v := range c.counts.Status {
		out.Status[k] = v
	}
	return out
}

// Wait returns the counts once done holds of them, or an error when ctx
// ends first.
func (c *Conn) Wait(ctx context.Context, done func(Counts) bool) (Counts, error) {
	for {
		c.mu.Lock()
		got, changed := c.countsLocked(), c.changed
		c.mu.Unlock()
		if done(got) {
			return got, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return got, ctx.Err()
		}
	}
}

// read handles the server's frames until the connection fails.
func (c *Conn) read() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.update(func(n *Counts) { n.Closed, n.ReadErr = true, err })
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
				continue
			}
			c.mu.Lock()
			if ack := c.acks[f.Data]; ack != nil {
				close(ack)
				delete(c.acks, f.Data)
			}
			c.mu.Unlock()
		case *http2.RSTStreamFrame:
			c.update(func(n *Counts) {
				if c.reset[f.StreamID] {
					return
				}
				c.reset[f.StreamID] = true
				if f.ErrCode == http2.ErrCodeRefusedStream {
					n.Refused++
				} else {
					n.Reset++
				}
			})
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // response headers; the trailers end the call
			}
			code := codes.Unknown
			if v := f.PseudoValue("status"); v != "" && v != "200" {
				code = codes.Internal
			}
			for _, hf := range f.RegularFields() {
				if hf.Name == "grpc-status" {
					if v, err := strconv.Atoi(hf.Value); err == nil {
						code = codes.Code(v)
					}
				}
			}
			c.update(func(n *Counts) { n.Status[code]++ })
		case *http2.GoAwayFrame:
			debug := string(f.DebugData())
			c.update(func(n *Counts) { n.GoAways, n.GoAway, n.GoAwayDebug = n.GoAways+1, f.ErrCode, debug })
		}
	}
}

// write sends what w writes, from the reading goroutine; a failure shows
// as the read's.
func (c *Conn) write(w func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := w(); err == nil {
		_ = c.bw.Flush()
	}
}

func (c *Conn) update(change func(*Counts)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	change(&c.counts)
	close(c.changed)
	c.changed = make(chan struct{})
}
