// Package fastlane serves a narrow kind of HTTP/1.1 request itself, on a
// listener it shares with an http.Server, and hands every connection that
// sends anything else to that server.
//
// The kind it serves is the one a reverse proxy sends a forward-auth
// service many thousands of times a second: a GET or HEAD without a body,
// on a path the caller chooses, over a kept-alive connection. net/http
// serves such a request with machinery that is there for every other kind
// (a goroutine that watches the connection while the handler runs, read
// deadlines set and cleared around each request, a response writer built
// for streaming), and behind a proxy that machinery costs more CPU than
// the decision does. The lane reads the request head into a buffer of its
// own, builds the *http.Request, runs the same handler the server runs,
// and writes the buffered answer in one write.
//
// Anything outside that kind (another method, a body, HTTP/1.0, an
// upgrade, a head larger than the buffer, a header the lane does not
// read byte for byte as net/http would) is not refused: the connection,
// with every byte read from it so far, is handed to the http.Server,
// which serves it from that request on exactly as if it had accepted it.
// So the lane can only ever answer a request net/http would have answered
// the same way; what it changes is the cost. FuzzLaneMatchesNetHTTP holds
// it to that: the same bytes to both, the same answers, byte for byte but
// Date, and the connection ended at the same point.
//
// The handler is held to what net/http holds it to (a Content-Length it
// declares, headers changed after WriteHeader not sent, a panic ending the
// connection) with a response writer that keeps the whole answer until
// the handler returns. So the handler must not need what that writer
// lacks: http.Flusher and http.Hijacker, http.ResponseController's
// deadlines and full duplex, trailers, a Transfer-Encoding of its own, and
// 1xx answers; the limiter's handlers use none of them. A request's
// context ends with its connection, not when its client goes away while
// the handler runs (net/http watches the connection for that with a read
// in the background, which is much of what the lane saves), nor when the
// handler returns. Fallback's ConnState, ConnContext and BaseContext hooks
// make Serve fail, as the lane cannot call them as net/http would; TLS
// connections go to Fallback at once. Keep-alives turned off with
// SetKeepAlivesEnabled are not seen by the lane.
package fastlane

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves the requests Match accepts on its listener with the
// Fallback server's handler, and hands every other connection to Fallback.
type Server struct {
	// Fallback serves every connection the lane does not, from the first
	// request the lane does not take. Its Handler serves the lane's
	// requests too, and its ReadHeaderTimeout, ReadTimeout, WriteTimeout
	// and IdleTimeout bound the lane's connections as they bound its own.
	// Its ErrorLog gets the lane's panics. It must have no ConnState,
	// ConnContext or BaseContext hook: Serve refuses them.
	Fallback *http.Server
	// Match reports whether the lane serves a GET or HEAD of path (the
	// request target, which for the lane has no query and no
	// percent-encoding).
	Match func(path string) bool

	mu       sync.Mutex
	conns    map[*conn]struct{}
	closing  atomic.Bool
	listener net.Listener
	handoff  *handoffListener
}

// Serve accepts connections on ln until Shutdown, serving lane requests
// itself and handing the rest to Fallback. Like http.Server's Serve, it
// always returns a non-nil error, http.ErrServerClosed after Shutdown.
// A Server serves one listener.
func (s *Server) Serve(ln net.Listener) error {
	if f := s.Fallback; f.ConnState != nil || f.ConnContext != nil || f.BaseContext != nil {
		// A connection handed over would be reported to them twice, the
		// second time wrapped: better refused than seen wrong.
		ln.Close()
		return errors.New("fastlane: Fallback has a ConnState, ConnContext or BaseContext hook, which the lane does not call as net/http would")
	}
	s.mu.Lock()
	if s.listener != nil || s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		if s.closing.Load() {
			return http.ErrServerClosed
		}
		return errors.New("fastlane: Serve called twice")
	}
	s.listener = ln
	s.conns = map[*conn]struct{}{}
	s.handoff = newHandoffListener(ln.Addr())
	s.mu.Unlock()

	// Fallback's Serve ends when its Shutdown or Close closes the handoff
	// listener; its connections are its own to finish.
	go s.Fallback.Serve(s.handoff) //nolint:errcheck // always ErrServerClosed or a closed listener

	ctx := context.WithValue(context.Background(), http.ServerContextKey, s.Fallback)
	var tempDelay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of file descriptors and the like: wait and try again,
				// as net/http does, rather than end the server.
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				time.Sleep(tempDelay)
				continue
			}
			s.Fallback.Close()
			return err
		}
		tempDelay = 0
		if _, isTLS := c.(*tls.Conn); isTLS {
			// The lane reads no TLS state into its requests: such a
			// connection is Fallback's from the start.
			if !s.handOff(c, nil) {
				c.Close()
			}
			continue
		}
		lc := s.newConn(c, ctx)
		if lc == nil {
			c.Close() // shutting down
			continue
		}
		go lc.serve()
	}
}

// Shutdown stops accepting, closes the lane's idle connections, lets
// requests in flight finish (on the lane and on Fallback, which it shuts
// down too), and returns when all are done or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	ln := s.listener
	if ln != nil {
		ln.Close()
	}
	s.mu.Unlock()

	fallback := make(chan error, 1)
	go func() { fallback <- s.Fallback.Shutdown(ctx) }()

	// As net/http does: close what is idle now, and look again until
	// nothing is left, since a connection busy now is idle later.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !s.closeIdle() {
		select {
		case <-ctx.Done():
			// As net/http's Shutdown, it leaves the busy connections be.
			return errors.Join(ctx.Err(), <-fallback)
		case <-tick.C:
		}
	}
	return <-fallback
}

// closeIdle closes every lane connection waiting for a request, and
// reports whether none is left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.rwc.Close()
		}
	}
	return len(s.conns) == 0
}

// handler is Fallback's handler, or net/http's default for a nil one.
func (s *Server) handler() http.Handler {
	if h := s.Fallback.Handler; h != nil {
		return h
	}
	return http.DefaultServeMux
}

// forget drops c from the connections Shutdown waits for.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// handOff gives c, with the bytes read from it and not yet served, to
// Fallback. It reports false when Fallback no longer accepts (shutting
// down): the caller then closes c.
func (s *Server) handOff(c net.Conn, unread []byte) bool {
	if len(unread) > 0 {
		c = &prefixConn{Conn: c, prefix: append([]byte(nil), unread...)}
	}
	return s.handoff.give(c)
}

// handoffListener is the listener Fallback serves: its connections are
// the ones the lane hands over.
type handoffListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

// give waits until Fallback accepts c, or reports false once the listener
// is closed.
func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

// Accept returns the next connection handed over.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close makes Accept and give fail from now on.
func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is the address of the listener the lane accepts on.
func (l *handoffListener) Addr() net.Addr { return l.addr }

// prefixConn is a connection whose first bytes were already read: Read
// returns them before reading the connection again.
type prefixConn struct {
	net.Conn
	prefix []byte
}

// CloseWrite half-closes the connection when it can, as net/http does
// before it closes one whose answer ends at the close.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
