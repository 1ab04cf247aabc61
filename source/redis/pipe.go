package redis

import (
	"context"
	"sync"
	"time"

	"github.com/jmhodges/clock"
	goredis "github.com/redis/go-redis/v9"
)

// Concurrent script calls to one Redis node share round trips. Without a
// coalescing window (below), a caller that finds nothing queued and a
// flusher slot free sends its own call at once, in its own goroutine and
// under its own context, exactly as without a pipe: one caller, one round
// trip, no added latency. Calls that arrive while maxFlushers round trips
// are in flight are queued, and a flusher sends everything queued as one
// pipeline as soon as a slot frees up, packed into as few script calls as
// the node allows (pack.go). The reason is CPU, not latency: on a small
// machine the system calls of one request per round trip, on both sides,
// and Redis's fixed cost per script call weigh as much as the script's
// own work, and a pipeline of fifty calls pays them once.
//
// With a coalescing window (Options.CoalesceWindow), a caller that would
// go alone waits that long first, queued, with a flusher that sends the
// queue when the window ends: the calls that arrive meanwhile share its
// round trip, and a call none joined goes alone, as it would have. The
// window opens only when nothing is in flight: calls queued behind a
// round trip go as soon as it is back.
//
// Atomicity is unchanged: every batch is still decided inside one script
// run, and Redis runs each script to completion before anything else,
// pipelined or not. A pipeline is not a transaction: its calls are
// independent, other clients' commands may run between them, and each
// gets its own reply or error.

// maxPipeline bounds the calls one pipeline carries, so that one flush
// cannot hold a connection for long, nor its packed script hold Redis.
// Of them, one at most is a sync call of more than a few counters
// (scriptCall.heavy), which carries up to hundreds: Redis runs a
// client's pipeline, or the one script it is packed into, before it
// turns to anyone else, so a pipeline of sync calls would hold every
// other decision for as long as all of their counters take (a sync of
// 100,000 counters, tens of milliseconds).
const maxPipeline = 128

// maxFlushers is how many round trips to one node may be in flight at once
// (calls sent alone by their callers, and pipelines). With one, every call
// that arrives during a round trip joins the next pipeline: measured under
// the harness's load (bench/harness, 50 connections, GCRA spends), script
// runs carry 14 decisions instead of 8 with two in flight, Redis spends 17%
// less CPU per decision, and neither req/s nor the p99 latencies (closed
// loop, and open loop at 5,000 req/s) got worse. More in flight would only
// make each pipeline shorter. It also bounds a node to 128 calls per round
// trip: some 128k requests a second at a round trip of 1 ms.
const maxFlushers = 1

// queued is a script call waiting in a pipe and, once done is closed, its
// raw reply (decode reads it).
type queued struct {
	ctx   context.Context
	call  *scriptCall
	reply any
	err   error
	done  chan struct{}
}

// finish hands a call its answer; the caller may have left already.
func (q *queued) finish(reply any, err error) {
	q.reply, q.err = reply, err
	close(q.done)
}

// pipe coalesces the script calls to one Redis node (the standalone
// server, or one cluster master).
type pipe struct {
	node    *goredis.Client
	script  *goredis.Script
	wire    wire
	packing packing
	// timeout bounds one flush (a free connection, sending, the replies):
	// callers do not wait for it, they leave when their context ends, but
	// the flusher must come back to serve the queue.
	timeout time.Duration
	// window is Options.CoalesceWindow, timed on clock.
	window time.Duration
	clock  clock.Clock

	mu       sync.Mutex
	queue    []*queued
	flushers int // round trips in flight, at most maxFlushers
}

// do runs one script call: alone when nothing else waits (at once, or
// after the coalescing window if none joined it), or else queued until a
// flusher sends it. A queued caller gets its reply or, as
// soon as ctx ends, ctx's error, whichever comes first. A call whose ctx
// ended before a flusher took it is never sent. A call already sent when
// ctx ends may still run in Redis (as with any remote call whose deadline
// passes in flight). A call sent alone waits as a plain go-redis call
// does: until its reply, its deadline or the read timeout.
func (p *pipe) do(ctx context.Context, c *scriptCall) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, notApplied(err)
	}
	p.mu.Lock()
	if len(p.queue) == 0 && p.flushers < maxFlushers && p.window == 0 {
		// Nothing to share with: the caller sends its own call, in its own
		// goroutine and under its own context (no hand-off to a flusher,
		// no pipeline).
		p.flushers++
		p.mu.Unlock()
		reply, err := p.alone(ctx, c)
		p.release()
		return reply, err
	}
	q := &queued{ctx: ctx, call: c, done: make(chan struct{})}
	p.queue = append(p.queue, q)
	start := p.flushers < maxFlushers
	var window <-chan time.Time
	if start {
		p.flushers++
		if p.window > 0 {
			// The caller found no flusher, so nothing is in flight: the
			// window opens, timed before the lock is let go.
			window = p.clock.After(p.window)
		}
	}
	p.mu.Unlock()
	if start {
		// A flusher lives only while there is work, so an idle source
		// holds no goroutines and needs no shutdown.
		go p.flush(window)
	}
	select {
	case <-q.done:
		return q.reply, q.err
	case <-ctx.Done():
		if p.withdraw(q) {
			return nil, notApplied(ctx.Err())
		}
		return nil, ctx.Err()
	}
}

// alone sends c by itself under ctx, as a plain go-redis call: it waits
// until its reply, ctx's end or the read timeout.
func (p *pipe) alone(ctx context.Context, c *scriptCall) (any, error) {
	if !p.wire.fast(c) {
		keys, args := p.wire.encode(c)
		return p.script.Run(ctx, p.node, keys, args...).Result()
	}
	// A pack of one, its key declared, on the script's fast path
	// (lua/fast.lua); its reply is the call's own, or its error.
	keys, args := p.wire.encodePacked([]*scriptCall{c}, packKeys)
	reply, err := p.script.Run(ctx, p.node, keys, args...).Result()
	if items, ok := reply.([]any); ok && err == nil && len(items) > 0 {
		if e, isErr := items[0].(error); isErr {
			return nil, e
		}
	}
	return reply, err
}

// withdraw takes q out of the queue if no flusher has taken it yet, and
// reports whether it did: a withdrawn call is never sent, so its caller
// can say that nothing was applied. A call already taken may be running
// in Redis.
func (p *pipe) withdraw(q *queued) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, other := range p.queue {
		if other == q {
			p.queue = append(p.queue[:i:i], p.queue[i+1:]...)
			return true
		}
	}
	return false
}

// release gives back the flusher slot of a caller that sent its own call.
// Calls queued meanwhile get a flusher in its place, since they were
// queued on the understanding that one would come.
func (p *pipe) release() {
	p.mu.Lock()
	handOver := len(p.queue) > 0
	if !handOver {
		p.flushers--
	}
	p.mu.Unlock()
	if handOver {
		go p.flush(nil)
	}
}

// flush sends the queue, one pipeline at a time, until it is empty; first,
// when window is not nil, it waits for window to fire while more calls
// join the queue. A call that none joined goes alone, under its caller's
// context, exactly as without a window.
func (p *pipe) flush(window <-chan time.Time) {
	if window != nil {
		<-window
		p.mu.Lock()
		if len(p.queue) == 1 {
			q := p.queue[0]
			p.queue = nil
			p.mu.Unlock()
			q.finish(p.alone(q.ctx, q.call))
		} else {
			p.mu.Unlock()
		}
	}
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.flushers--
			p.mu.Unlock()
			return
		}
		var batch []*queued
		batch, p.queue = nextPipeline(p.queue)
		p.mu.Unlock()
		p.send(batch)
	}
}

// nextPipeline splits queue into the calls of the next pipeline, in queue
// order, and those left for later: at most maxPipeline calls, of which
// at most one heavy sync call (scriptCall.heavy). The heavy ones left
// keep their order, and go in the pipelines that follow, one each.
func nextPipeline(queue []*queued) (batch, rest []*queued) {
	n := min(len(queue), maxPipeline)
	heavy := 0
	for _, q := range queue[:n] {
		if q.call.heavy() {
			heavy++
		}
	}
	if heavy <= 1 {
		if n == len(queue) {
			return queue, nil
		}
		return queue[:n:n], queue[n:]
	}
	batch = make([]*queued, 0, n)
	heavy = 0
	for i, q := range queue {
		if len(batch) == maxPipeline {
			rest = append(rest, queue[i:]...)
			break
		}
		if q.call.heavy() {
			if heavy++; heavy > 1 {
				rest = append(rest, q)
				continue
			}
		}
		batch = append(batch, q)
	}
	return batch, rest
}

// send runs one pipeline and hands every call its reply. Calls whose
// caller has already left are dropped first. Commands Redis answers with
// NOSCRIPT are sent again after the script is loaded, in one more round
// trip: NOSCRIPT means nothing of that command ran.
func (p *pipe) send(batch []*queued) {
	live := batch[:0]
	for _, q := range batch {
		if err := q.ctx.Err(); err != nil {
			q.finish(nil, err)
			continue
		}
		live = append(live, q)
	}
	if len(live) == 0 {
		return
	}
	packs := p.pack(live)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	cmds := p.exec(ctx, packs)
	var again [][]*queued
	for i, u := range packs {
		if err := cmds[i].Err(); err != nil && isNoScript(err) {
			again = append(again, u)
			continue
		}
		deliver(u, cmds[i])
	}
	if len(again) == 0 {
		return
	}
	if err := p.script.Load(ctx, p.node).Err(); err != nil {
		for _, u := range again {
			for _, q := range u {
				q.finish(nil, err)
			}
		}
		return
	}
	cmds = p.exec(ctx, again)
	for i, u := range again {
		deliver(u, cmds[i])
	}
}

// pipes holds the pipe of every cluster master a source talks to, made on
// first use. A master that leaves the cluster keeps its (idle) entry:
// there are only ever a handful.
type pipes struct {
	script  *goredis.Script
	wire    wire
	timeout time.Duration
	window  time.Duration
	clock   clock.Clock
	byNode  sync.Map // *goredis.Client -> *pipe
}

func (ps *pipes) forNode(node *goredis.Client) *pipe {
	if p, ok := ps.byNode.Load(node); ok {
		return p.(*pipe)
	}
	p, _ := ps.byNode.LoadOrStore(node, &pipe{node: node, script: ps.script, wire: ps.wire, packing: packInline, timeout: ps.timeout,
		window: ps.window, clock: ps.clock})
	return p.(*pipe)
}
