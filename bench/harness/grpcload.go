package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// shouldRateLimit is the full method name Envoy calls.
const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// rawCodec hands gRPC messages that are already encoded, and takes answers
// back as bytes: the load generator shares two cores with the server it
// measures, so it encodes every request once, before measuring, and
// decodes answers only on a sample. Both sides of a call are *[]byte.
//
// Its name is "proto", so the call's content type is the one Envoy sends
// and the server decodes the bytes with its usual protobuf codec.
type rawCodec struct{}

// Name is the content subtype of the calls made with the codec.
func (rawCodec) Name() string { return "proto" }

// Marshal passes the request's bytes through without copying them; gRPC
// only reads them, so one encoded request may be in flight on several
// calls at once.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot send a %T, only *[]byte", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

// Unmarshal copies the answer into the caller's slice, reusing its
// storage, so a worker allocates nothing per answer once its slice has
// grown to the size of one.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot receive into a %T, only *[]byte", v)
	}
	*b = (*b)[:0]
	for _, buf := range data {
		*b = append(*b, buf.ReadOnlyData()...)
	}
	return nil
}

// grpcBench is the gRPC rows' workload: the domain and descriptor key the
// harness's rules file maps to the limit the HTTP rows spend.
const (
	grpcBenchDomain = "bench"
	grpcBenchKey    = "api_key"
)

// encodeRequests returns n encoded RateLimitRequests of domain, the i-th
// with one descriptor {key: "key-<i+1>"} and a cost of 1: the same ids
// bench/spend.lua spends over HTTP.
func encodeRequests(domain, key string, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		req := &rlsv3.RateLimitRequest{
			Domain: domain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: fmt.Sprintf("key-%d", i+1)}},
			}},
			HitsAddend: 1,
		}
		b, err := proto.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("encoding request %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// errBadAnswer is what checkAnswer wraps: the server answered with OK but
// not with a rate-limit answer of one decided descriptor.
var errBadAnswer = errors.New("not a rate-limit answer")

// checkAnswer decodes an answer into into (reused by the caller) and
// returns an error unless it is a RateLimitResponse of one descriptor
// whose overall code is OK or OVER_LIMIT, and, when limit is not empty,
// whose descriptor was counted by that limit.
func checkAnswer(answer []byte, into *rlsv3.RateLimitResponse, limit string) error {
	into.Reset()
	if err := proto.Unmarshal(answer, into); err != nil {
		return fmt.Errorf("%w: %w", errBadAnswer, err)
	}
	switch into.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT:
	default:
		return fmt.Errorf("%w: overall code %s", errBadAnswer, into.GetOverallCode())
	}
	if n := len(into.GetStatuses()); n != 1 {
		return fmt.Errorf("%w: %d descriptor statuses for one descriptor", errBadAnswer, n)
	}
	if got := into.GetStatuses()[0].GetCurrentLimit().GetName(); limit != "" && got != limit {
		return fmt.Errorf("%w: the descriptor was counted by %q, not %q (is the rules file loaded?)", errBadAnswer, got, limit)
	}
	return nil
}

// grpcLoad is a closed-loop load generator for ShouldRateLimit: a fixed
// number of calls in flight, each worker sending its next call as soon as
// its last one is answered (as wrk does with connections), spread over a
// few HTTP/2 connections.
type grpcLoad struct {
	conns    []*grpc.ClientConn
	requests [][]byte
	opts     []grpc.CallOption
}

// sampleEvery is how often, in calls per worker, an answer is decoded and
// checked; the others are only counted by their gRPC status.
const sampleEvery = 256

// newGRPCLoad opens conns connections to addr (host:port) for requests.
func newGRPCLoad(addr string, conns int, requests [][]byte) (*grpcLoad, error) {
	if conns < 1 {
		return nil, fmt.Errorf("grpc load: %d connections", conns)
	}
	if len(requests) == 0 {
		return nil, errors.New("grpc load: no requests")
	}
	l := &grpcLoad{requests: requests, opts: []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}}
	for range conns {
		// One ClientConn is one HTTP/2 connection; passthrough skips
		// resolving an address that is already one.
		cc, err := grpc.NewClient("passthrough:///"+addr, dialOptions()...)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("grpc load: %w", err)
		}
		l.conns = append(l.conns, cc)
	}
	return l, nil
}

// dialOptions keep the client's own work per call small: no retry
// bookkeeping (a retryable call keeps its request for replay), and flow
// control windows large enough that neither side waits for window
// updates (a fixed window also turns off the pings that size it).
func dialOptions() []grpc.DialOption {
	const window = 16 << 20
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithInitialWindowSize(window),
		grpc.WithInitialConnWindowSize(window),
	}
}

func (l *grpcLoad) close() {
	for _, cc := range l.conns {
		_ = cc.Close()
	}
}

// preflight sends a few requests on every connection and checks every
// answer in full, limit included: a row that measured answers of the
// wrong kind would measure nothing.
func (l *grpcLoad) preflight(ctx context.Context, limit string) error {
	var answer []byte
	var resp rlsv3.RateLimitResponse
	for i, cc := range l.conns {
		for j := range 3 {
			req := &l.requests[(i*3+j)%len(l.requests)]
			if err := cc.Invoke(ctx, shouldRateLimit, req, &answer, l.opts...); err != nil {
				return fmt.Errorf("grpc load: first calls: %w", err)
			}
			if err := checkAnswer(answer, &resp, limit); err != nil {
				return fmt.Errorf("grpc load: first calls: %w", err)
			}
		}
	}
	return nil
}

// loadStats is what one closed-loop run measured.
type loadStats struct {
	calls     int64           // answered calls, errors included
	errors    int64           // calls that failed
	badAnswer int64           // sampled answers that were not rate-limit answers
	firstErr  error           // the first failure or bad answer, to report
	latencies []time.Duration // of every call, sorted
	elapsed   time.Duration
}

// workerStats is one worker's share of a run, merged at the end.
type workerStats struct {
	latencies       []time.Duration
	errors, badSeen int64
	firstErr        error
}

// run keeps inFlight calls going for d and returns what they measured.
func (l *grpcLoad) run(ctx context.Context, inFlight int, d time.Duration) (loadStats, error) {
	if inFlight < 1 {
		return loadStats{}, fmt.Errorf("grpc load: %d calls in flight", inFlight)
	}
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	workers := make([]workerStats, inFlight)
	// A worker's first latency slice holds what it would answer at 50 µs
	// a call; it grows if the server is faster.
	capacity := int(d/(50*time.Microsecond)) / inFlight
	var wg sync.WaitGroup
	start := time.Now()
	for w := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(ctx, l.conns[w%len(l.conns)], uint64(w), &stop, &workers[w], capacity)
		}()
	}
	wg.Wait()
	s := loadStats{elapsed: time.Since(start)}
	n := 0
	for _, w := range workers {
		n += len(w.latencies)
	}
	s.latencies = make([]time.Duration, 0, n)
	for _, w := range workers {
		s.latencies = append(s.latencies, w.latencies...)
		s.errors += w.errors
		s.badAnswer += w.badSeen
		if s.firstErr == nil {
			s.firstErr = w.firstErr
		}
	}
	s.calls = int64(len(s.latencies))
	slices.Sort(s.latencies)
	return s, ctx.Err()
}

// worker sends calls one after another on cc until stop, each a random
// one of the requests, and records their latency and failures.
func (l *grpcLoad) worker(ctx context.Context, cc *grpc.ClientConn, seed uint64, stop *atomic.Bool, st *workerStats, capacity int) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	st.latencies = make([]time.Duration, 0, capacity)
	var answer []byte
	var resp rlsv3.RateLimitResponse
	for n := 0; !stop.Load() && ctx.Err() == nil; n++ {
		req := &l.requests[rng.IntN(len(l.requests))]
		t0 := time.Now()
		err := cc.Invoke(ctx, shouldRateLimit, req, &answer, l.opts...)
		st.latencies = append(st.latencies, time.Since(t0))
		if err != nil {
			st.errors++
			if st.firstErr == nil {
				st.firstErr = fmt.Errorf("%s: %s", status.Code(err), status.Convert(err).Message())
			}
			continue
		}
		if n%sampleEvery == 0 {
			if err := checkAnswer(answer, &resp, ""); err != nil {
				st.badSeen++
				if st.firstErr == nil {
					st.firstErr = err
				}
			}
		}
	}
}

// percentile is the nearest-rank p-th quantile (0 < p ≤ 1) of sorted
// latencies: the smallest one that at least p of all are at or below.
// It is 0 for no latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
