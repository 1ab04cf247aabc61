package envoyapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"runtime"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/envoyapi"
	"github.com/limiter-dev/limiter/internal/rawgrpc"
)

// withBounds sets the server's bounds on clients.
func withBounds(b envoyapi.Bounds) func(*setup) {
	return func(s *setup) { s.opts.Bounds = b }
}

// held is the goroutines of the test process and the memory its heap and
// stacks hold, after a collection.
func held() (goroutines int, bytes uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapInuse + ms.StackInuse
}

// dialRaw opens a bare HTTP/2 connection to h's server, closed when the
// test ends.
func dialRaw(t *testing.T, h *harness) *rawgrpc.Conn {
	t.Helper()
	c, err := rawgrpc.Dial(h.conn.Target())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// One connection opens 20,000 ShouldRateLimit calls and never sends their
// requests. The server holds no more of them than the stream cap, so its
// goroutines and memory stay bounded; refuses the rest at once; ends those
// it holds with DEADLINE_EXCEEDED at the call timeout; and serves another
// client all along. Without the bounds, each such call kept a goroutine
// and about 11 KiB until the client hung up: 20,000 goroutines and over
// 200 MiB.
func TestHalfOpenCallsAreBounded(t *testing.T) {
	const (
		attack      = 20000
		maxStreams  = 100
		callTimeout = 2 * time.Second // longer than the attack takes to arrive, under the race detector too
		// memorySlack is what the test process may hold beyond the
		// held calls' own memory: what the collector has not returned
		// and the attacker's buffers.
		memorySlack = 8 << 20
		perCall     = 32 << 10 // over twice what a held call costs
	)
	h := start(t, withBounds(envoyapi.Bounds{MaxConcurrentStreams: maxStreams, CallTimeout: callTimeout}))
	h.call(request("edge", desc("user", "warm-up"))) // the other client's connection is up before counting
	baseGoroutines, baseBytes := held()

	c := dialRaw(t, h)
	began := time.Now()
	if err := c.Open(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, attack); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil { // the server has read every call's headers
		t.Fatal(err)
	}
	arrived := time.Since(began)
	goroutines, heldBytes := held()
	refused := c.Counts().Refused
	t.Logf("%d calls without a request arrived in %v: goroutines %d then %d, heap and stacks %d KiB then %d KiB, %d refused",
		attack, arrived, baseGoroutines, goroutines, baseBytes>>10, heldBytes>>10, refused)
	if limit := baseGoroutines + maxStreams + 50; goroutines > limit {
		t.Errorf("%d goroutines with the calls under way (%d before); want at most %d: the stream cap and some slack", goroutines, baseGoroutines, limit)
	}
	if grew, limit := int64(heldBytes)-int64(baseBytes), int64(maxStreams*perCall+memorySlack); grew > limit {
		t.Errorf("heap and stacks grew by %d KiB with the calls under way; want at most %d KiB", grew>>10, limit>>10)
	}
	// The cap holds at every moment: when the calls took longer than the
	// call timeout to arrive (a loaded machine), the calls held first
	// ended, and as many more were taken.
	if mostHeld := maxStreams * (1 + int(arrived/callTimeout)); refused < attack-mostHeld || refused > attack-maxStreams {
		t.Errorf("%d calls refused (REFUSED_STREAM); want %d to %d: all beyond the cap of %d held at once", refused, attack-mostHeld, attack-maxStreams, maxStreams)
	}

	// Another client is served while the calls are held.
	other, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	resp, err := h.client.ShouldRateLimit(other, request("edge", desc("user", "other")))
	if err != nil || resp.GetOverallCode() != ok {
		t.Errorf("another client's call during the attack: %v, %v; want OK", resp, err)
	}
	if held := time.Since(began); held >= callTimeout {
		t.Logf("the other client was served %v after the attack began, past the call timeout: the calls may have ended already", held)
	}

	// Every call the server held ends with DEADLINE_EXCEEDED, at the call
	// timeout.
	accepted := attack - refused
	waitCtx, stopWait := context.WithTimeout(context.Background(), callTimeout+10*time.Second)
	defer stopWait()
	counts, err := c.Wait(waitCtx, func(n rawgrpc.Counts) bool { return n.Status[codes.DeadlineExceeded] >= accepted })
	if err != nil {
		t.Fatalf("%v after the attack began: %+v; want %d calls ended with DEADLINE_EXCEEDED", time.Since(began), counts, accepted)
	}
	if ended := time.Since(began); ended < callTimeout {
		t.Errorf("the held calls ended %v after their headers were sent, before the call timeout of %v", ended, callTimeout)
	}
	// After its trailers, the server resets a stream the client has not
	// ended, so each held call may have a reset of its own.
	if len(counts.Status) != 1 || counts.Reset > accepted || counts.GoAways != 0 {
		t.Errorf("the server answered %+v; want only refusals and DEADLINE_EXCEEDED", counts)
	}

	// Then the goroutines are let go, though the connection stays open.
	deadline := time.Now().Add(5 * time.Second)
	for {
		g, _ := held()
		if g <= baseGoroutines+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 5s after the calls ended; %d before the attack", g, baseGoroutines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A call's headers are bounded too. Calls whose headers repeat a "-bin"
// header HPACK sends as a byte or two, and gRPC would decode into new
// memory each time, some 11 MiB a call from a few KiB on the wire, are
// reset at once, and the server holds nothing of them.
func TestLargeHeadersAreRefused(t *testing.T) {
	const calls = 20
	h := start(t) // the default bounds
	_, baseBytes := held()
	c := dialRaw(t, h)
	value := base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{'x'}, 2900))
	header := make([][2]string, 4000)
	for i := range header {
		header[i] = [2]string{"x-padding-bin", value}
	}
	if err := c.Open(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, calls, header...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	_, heldBytes := held()
	if grew := int64(heldBytes) - int64(baseBytes); grew > 8<<20 {
		t.Errorf("heap and stacks grew by %d KiB with %d calls of large headers; want at most 8 MiB", grew>>10, calls)
	}
	if n := c.Counts(); n.Reset != calls {
		t.Errorf("%+v; want all %d calls reset", n, calls)
	}
	h.call(request("edge", desc("user", "after-large-headers")))
}

// Of a client's own deadline (grpc-timeout) and the call timeout, the
// earlier ends a call whose request never comes. At the client's
// deadline gRPC resets the stream, and the answer DEADLINE_EXCEEDED may or
// may not make it first; the call timeout ends the call with that answer,
// then a reset (the client never ended its side).
func TestTheEarlierDeadlineEndsTheCall(t *testing.T) {
	const short = 200 * time.Millisecond
	for _, tc := range []struct {
		name        string
		callTimeout time.Duration
		grpcTimeout string
		mustAnswer  bool
	}{
		{"the client's", time.Minute, "200m", false},
		{"the server's", short, "60S", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, withBounds(envoyapi.Bounds{CallTimeout: tc.callTimeout}))
			c := dialRaw(t, h)
			began := time.Now()
			if err := c.Open(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, 1, [2]string{"grpc-timeout", tc.grpcTimeout}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			counts, err := c.Wait(ctx, func(n rawgrpc.Counts) bool { return n.Reset > 0 })
			answered := counts.Status[codes.DeadlineExceeded]
			if err != nil || counts.Reset != 1 || len(counts.Status) != answered || tc.mustAnswer && answered != 1 {
				t.Fatalf("%v, %+v; want the call reset, after DEADLINE_EXCEEDED if anything", err, counts)
			}
			if ended := time.Since(began); ended < short || ended > short+5*time.Second {
				t.Errorf("the call ended after %v; want about %v", ended, short)
			}
		})
	}
}

// A streaming call (a health watch, reflection) whose first request does
// not come within the call timeout ends with DEADLINE_EXCEEDED too, while
// a watch that has its request stays open past it.
func TestHalfOpenStreamingCallsEnd(t *testing.T) {
	const callTimeout = 200 * time.Millisecond
	h := start(t, withBounds(envoyapi.Bounds{CallTimeout: callTimeout}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := healthpb.NewHealthClient(h.conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: rlsService})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first answer of the watch: %v, %v", resp, err)
	}
	recvd := make(chan error, 1)
	go func() {
		_, err := watch.Recv()
		recvd <- err
	}()

	c := dialRaw(t, h)
	began := time.Now()
	for _, method := range []string{healthpb.Health_Watch_FullMethodName, reflectionpb.ServerReflection_ServerReflectionInfo_FullMethodName} {
		if err := c.Open(method, 1); err != nil {
			t.Fatal(err)
		}
	}
	waitCtx, stopWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopWait()
	counts, err := c.Wait(waitCtx, func(n rawgrpc.Counts) bool { return n.Status[codes.DeadlineExceeded] >= 2 })
	if err != nil {
		t.Fatalf("%+v; want both streaming calls ended with DEADLINE_EXCEEDED", counts)
	}
	if ended := time.Since(began); ended < callTimeout {
		t.Errorf("the calls ended after %v, before the call timeout of %v", ended, callTimeout)
	}

	// The watch began before the raw calls and outlived them by far more
	// than the call timeout: it is still open.
	select {
	case err := <-recvd:
		t.Fatalf("the watch with its request ended after %v: %v", time.Since(began), err)
	case <-time.After(2 * callTimeout):
	}
	cancel()
	if err := <-recvd; status.Code(err) != codes.Canceled {
		t.Errorf("the watch ended with %v once cancelled; want Canceled", err)
	}
}

// A connection without calls is closed (GOAWAY) once idle for
// MaxConnectionIdle; one with a call under way is closed at
// MaxConnectionAge, and cut once MaxConnectionAgeGrace has passed too,
// well before the call's timeout; a client pinging more often than
// KeepaliveMinTime is sent away, one pinging less often is not.
func TestConnectionsAreBounded(t *testing.T) {
	// within is a subtest's bound on every wait.
	within := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	goAway := func(n rawgrpc.Counts) bool { return n.GoAways > 0 }
	closed := func(n rawgrpc.Counts) bool { return n.Closed }

	t.Run("idle", func(t *testing.T) {
		ctx := within(t)
		const idle = 200 * time.Millisecond
		h := start(t, withBounds(envoyapi.Bounds{MaxConnectionIdle: idle}))
		// The server's idle timer starts when it accepts the connection,
		// which is before the dial returns, so the wait is counted from
		// before the dial.
		began := time.Now()
		c := dialRaw(t, h)
		counts, err := c.Wait(ctx, goAway)
		if err != nil || counts.GoAway != http2.ErrCodeNo || counts.GoAwayDebug != "max_idle" {
			t.Fatalf("%v, %+v; want GOAWAY max_idle", err, counts)
		}
		if d := time.Since(began); d < idle {
			t.Errorf("GOAWAY after %v, before the idle limit of %v", d, idle)
		}
	})

	t.Run("age", func(t *testing.T) {
		ctx := within(t)
		const age, grace = 300 * time.Millisecond, 300 * time.Millisecond
		h := start(t, withBounds(envoyapi.Bounds{MaxConnectionAge: age, MaxConnectionAgeGrace: grace, CallTimeout: time.Minute}))
		began := time.Now() // before the dial, as in "idle"
		c := dialRaw(t, h)
		if err := c.Open(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, 1); err != nil {
			t.Fatal(err)
		}
		goaway, err := c.Wait(ctx, goAway)
		if err != nil || goaway.GoAwayDebug != "max_age" {
			t.Fatalf("%v, %+v; want GOAWAY max_age", err, goaway)
		}
		sent := time.Since(began)
		counts, err := c.Wait(ctx, closed)
		if err != nil {
			t.Fatalf("%+v; want the connection cut after the grace period", counts)
		}
		cut := time.Since(began)
		// The age has a tenth of jitter, and the client sees the GOAWAY
		// some time after the server sent it, so the grace is counted from
		// the earliest the server may have sent it, not from when the
		// client saw it: a loaded machine (the race detector) would
		// otherwise make a late sighting look like a short grace.
		if sent < age*9/10 || cut < age*9/10+grace {
			t.Errorf("GOAWAY after %v and the connection cut after %v; want them past the age of %v (less a tenth), then the grace of %v",
				sent, cut, age, grace)
		}
		if len(counts.Status) != 0 {
			t.Errorf("the call under way got an answer, %v; want it cut with the connection", counts.Status)
		}
	})

	t.Run("keepalive", func(t *testing.T) {
		ctx := within(t)
		const minTime = 100 * time.Millisecond
		h := start(t, withBounds(envoyapi.Bounds{KeepaliveMinTime: minTime}))
		c := dialRaw(t, h)
		// Pings no more often than allowed, with no call under way (as
		// Envoy's connection_keepalive sends them), are answered.
		for range 4 {
			if err := c.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(minTime * 3 / 2)
		}
		if n := c.Counts(); n.GoAways != 0 || n.Closed {
			t.Fatalf("pings every %v, allowed every %v: %+v", minTime*3/2, minTime, n)
		}
		// A burst of them closes the connection.
		for i := range 5 {
			if err := c.SendPing([8]byte{'b', 'u', 'r', 's', 't', byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		counts, err := c.Wait(ctx, goAway)
		if err != nil || counts.GoAway != http2.ErrCodeEnhanceYourCalm || counts.GoAwayDebug != "too_many_pings" {
			t.Fatalf("%v, %+v; want GOAWAY ENHANCE_YOUR_CALM too_many_pings", err, counts)
		}
	})
}
