package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// grpcLoad is a closed-loop load generator for ShouldRateLimit: a fixed
// number of calls in flight, each answered call followed at once by the
// next (as wrk does with connections), spread over a few HTTP/2
// connections of its own (h2Conn). It shares two cores with the server
// it measures, so it does per call little more than wrk does per
// request: requests and their header block are encoded once, and
// answers are checked by their status, decoded in full only on a sample.
type grpcLoad struct {
	conns []*h2Conn
}

// sampleEvery is how often, in calls per connection, an answer is
// decoded and checked in full; the others are checked by their status
// and framing only.
const sampleEvery = 256

// drainTimeout bounds how long a run waits, once its time is up, for the
// calls still in flight; preflightTimeout bounds the first calls.
const (
	drainTimeout     = 5 * time.Second
	preflightTimeout = 10 * time.Second
	preflightCalls   = 3
)

// newGRPCLoad opens conns connections to addr (host:port), giving the
// server a flow-control window of window bytes, for requests (encoded
// RateLimitRequests, each sent as a random one's turn comes).
func newGRPCLoad(ctx context.Context, addr string, conns int, window uint32, requests [][]byte) (*grpcLoad, error) {
	if conns < 1 {
		return nil, fmt.Errorf("grpc load: %d connections", conns)
	}
	if len(requests) == 0 {
		return nil, errors.New("grpc load: no requests")
	}
	block, err := requestHeaderBlock(addr)
	if err != nil {
		return nil, err
	}
	framed := make([][]byte, len(requests))
	for i, r := range requests {
		framed[i] = grpcFrame(r)
	}
	base := time.Now()
	l := &grpcLoad{}
	for i := range conns {
		c, err := dialH2(ctx, addr, window, block, framed, base, uint64(i))
		if err != nil {
			l.close()
			return nil, err
		}
		l.conns = append(l.conns, c)
	}
	return l, nil
}

func (l *grpcLoad) close() {
	for _, c := range l.conns {
		_ = c.close()
	}
}

// preflight makes a few calls on every connection, one at a time, and
// checks every answer in full, limit included: a row that measured
// answers of the wrong kind would measure nothing.
func (l *grpcLoad) preflight(ctx context.Context, limit string) error {
	st, err := l.runs(ctx, len(l.conns), func(r *connRun) {
		r.calls, r.sampleEvery, r.limit = preflightCalls, 1, limit
	}, preflightTimeout, nil)
	if err != nil {
		return fmt.Errorf("grpc load: first calls: %w", err)
	}
	if st.firstErr != nil {
		return fmt.Errorf("grpc load: first calls: %w", st.firstErr)
	}
	return nil
}

// loadStats is what one closed-loop run measured.
type loadStats struct {
	calls     int64           // answered calls, errors included
	errors    int64           // calls that failed
	badAnswer int64           // answers that were not rate-limit answers
	firstErr  error           // the first failure or bad answer, to report
	latencies []time.Duration // of every call, sorted
	elapsed   time.Duration
}

// run keeps inFlight calls going for d, then waits for those still in
// flight, and returns what they measured.
func (l *grpcLoad) run(ctx context.Context, inFlight int, d time.Duration) (loadStats, error) {
	if inFlight < 1 {
		return loadStats{}, fmt.Errorf("grpc load: %d calls in flight", inFlight)
	}
	// A connection's first latency slice holds what it would answer at
	// 20 µs a call; it grows if the server is faster.
	capacity := int(d/(20*time.Microsecond)) / len(l.conns)
	stopAt := d
	return l.runs(ctx, inFlight, func(r *connRun) {
		r.sampleEvery = sampleEvery
		r.latencies = make([]time.Duration, 0, capacity)
	}, drainTimeout, &stopAt)
}

// runs runs every connection's share of inFlight calls, set up by each,
// in a goroutine per connection and merges what they measured. With
// stopAt, the calls stop being renewed after that long, and those in
// flight must be answered within timeout after it; without, each
// connection makes the calls it was set up for within timeout.
func (l *grpcLoad) runs(ctx context.Context, inFlight int, each func(*connRun), timeout time.Duration, stopAt *time.Duration) (loadStats, error) {
	var stop atomic.Bool
	deadline := func(at time.Time) {
		for _, c := range l.conns {
			_ = c.nc.SetReadDeadline(at)
		}
	}
	runs := make([]connRun, len(l.conns))
	for i := range runs {
		runs[i].inFlight = inFlight / len(l.conns)
		if i < inFlight%len(l.conns) {
			runs[i].inFlight++
		}
		runs[i].stop = &stop
		each(&runs[i])
	}
	// The run is timed from before the timer is armed: timed from after,
	// a busy machine could delay the start past the timer's, and the run
	// would count fewer seconds than it lasted.
	start := time.Now()
	// The timer sets the deadlines before it stops the loops, so no loop
	// ends before its deadline is set, and the deadlines are cleared
	// after the timer has fired.
	var timer *time.Timer
	fired := make(chan struct{})
	if stopAt != nil {
		timer = time.AfterFunc(*stopAt, func() {
			deadline(time.Now().Add(timeout))
			stop.Store(true)
			close(fired)
		})
	} else {
		deadline(time.Now().Add(timeout))
	}
	cancel := context.AfterFunc(ctx, func() { deadline(time.Now()) })
	errs := make([]error, len(l.conns))
	var wg sync.WaitGroup
	for i, c := range l.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.run(&runs[i])
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if timer != nil && !timer.Stop() {
		<-fired
	}
	cancel()
	deadline(time.Time{})
	if err := ctx.Err(); err != nil {
		return loadStats{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return loadStats{}, err
	}
	return merge(runs, elapsed), nil
}

// merge is the load's measurements from its connections'.
func merge(runs []connRun, elapsed time.Duration) loadStats {
	s := loadStats{elapsed: elapsed}
	n := 0
	for _, r := range runs {
		n += len(r.latencies)
	}
	s.latencies = make([]time.Duration, 0, n)
	for _, r := range runs {
		s.latencies = append(s.latencies, r.latencies...)
		s.errors += r.errors
		s.badAnswer += r.badAnswer
		if s.firstErr == nil {
			s.firstErr = r.firstErr
		}
	}
	s.calls = int64(len(s.latencies))
	slices.Sort(s.latencies)
	return s
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
