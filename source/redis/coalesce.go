package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Concurrent script calls to one Redis node share round trips. A caller
// that finds nothing queued and a flusher slot free sends its own call at
// once, in its own goroutine and under its own context, exactly as without
// a coalescer: one caller, one round trip, no added latency. Calls that
// arrive while maxFlushers round trips are in flight are queued, and a
// flusher sends everything queued as one pipeline as soon as a slot frees
// up, and packed into single script calls: any calls on a standalone
// Redis, one-key calls on a cluster master. The reason is CPU, not latency: on a small machine the
// system calls of one request per round trip, on both sides, and Redis's
// fixed cost per script call weigh as much as the script's own work, and
// a pipeline of fifty calls pays them once.
//
// Atomicity is unchanged: every batch is still decided inside one script
// run, and Redis runs each script to completion before anything else,
// pipelined or not. A pipeline is not a transaction: its calls are
// independent, other clients' commands may run between them, and each
// gets its own reply or error. A packed call (operation M or P of
// bucket.lua) decides its batches one after another inside one script run,
// each as if alone, and a failing batch answers its own error.

// maxPipeline bounds the calls one pipeline carries, so that one flush
// cannot hold a connection for long and a burst is split between the
// flushers.
const maxPipeline = 128

// maxFlushers is how many round trips to one node may be in flight at once
// (calls sent alone by their callers, and pipelines). Two let Redis work on
// one while this process reads the other's replies and wakes their
// callers; more would only make each pipeline shorter.
const maxFlushers = 2

// maxPack bounds the batches packed into one script call: Redis runs
// nothing else while a script runs, and a few dozen batches take it a few
// hundred microseconds.
const maxPack = 32

// packing is how a pipe packs queued calls into script calls.
type packing int

const (
	// packNone sends one script call per queued call.
	packNone packing = iota
	// packKeys packs any calls into M calls, their keys declared: for a
	// standalone Redis, where a script may declare keys of any slot.
	packKeys
	// packInline packs one-key calls into P calls, their keys passed as
	// arguments: for a cluster master, where the keys a script declares
	// must share a slot but a script may reach undeclared keys of every
	// slot the node serves. A key whose slot has moved fails its own
	// batch having changed nothing that any answer can tell (bucket.lua,
	// operation P), and Source.eval sends that call again alone, its key
	// declared. A call of several keys is never packed
	// this way: its keys are declared, so that Redis checks them all
	// before the script runs.
	packInline
)

// call is one queued script call and, once done is closed, its answer.
type call struct {
	ctx   context.Context
	keys  []string
	args  []any
	reply any
	err   error
	done  chan struct{}
}

// pipe coalesces the script calls to one Redis node (the standalone
// server, or one cluster master).
type pipe struct {
	node    *goredis.Client
	script  *goredis.Script
	packing packing
	// timeout bounds one flush (a free connection, sending, the replies):
	// callers do not wait for it, they leave when their context ends, but
	// the flusher must come back to serve the queue.
	timeout time.Duration

	mu       sync.Mutex
	queue    []*call
	flushers int // round trips in flight, at most maxFlushers
}

func newPipe(node *goredis.Client, script *goredis.Script, packing packing, timeout time.Duration) *pipe {
	return &pipe{node: node, script: script, packing: packing, timeout: timeout}
}

// do runs one script call: alone at once when nothing else waits, or else
// queued until a flusher sends it. A queued caller gets its reply or, as
// soon as ctx ends, ctx's error, whichever comes first. A call whose ctx
// ended before a flusher took it is never sent. A call already sent when
// ctx ends may still run in Redis (as with any remote call whose deadline
// passes in flight). A call sent alone waits as a plain go-redis call
// does: until its reply, its deadline or the read timeout.
func (p *pipe) do(ctx context.Context, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, notApplied(err)
	}
	p.mu.Lock()
	if len(p.queue) == 0 && p.flushers < maxFlushers {
		// Nothing to share with: the caller sends its own call, in its own
		// goroutine and under its own context, exactly as without a
		// coalescer (no hand-off to a flusher, no pipeline).
		p.flushers++
		p.mu.Unlock()
		reply, err := p.script.Run(ctx, p.node, keys, args...).Result()
		p.release()
		return reply, err
	}
	c := &call{ctx: ctx, keys: keys, args: args, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	start := p.flushers < maxFlushers
	if start {
		p.flushers++
	}
	p.mu.Unlock()
	if start {
		// A flusher lives only while there is work, so an idle source
		// holds no goroutines and needs no shutdown.
		go p.flush()
	}
	select {
	case <-c.done:
		return c.reply, c.err
	case <-ctx.Done():
		if p.withdraw(c) {
			return nil, notApplied(ctx.Err())
		}
		return nil, ctx.Err()
	}
}

// withdraw takes c out of the queue if no flusher has taken it yet, and
// reports whether it did: a withdrawn call is never sent, so its caller
// can say that nothing was applied. A call already taken may be running
// in Redis.
func (p *pipe) withdraw(c *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, q := range p.queue {
		if q == c {
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
		go p.flush()
	}
}

// flush sends the queue, one pipeline at a time, until it is empty.
func (p *pipe) flush() {
	for {
		p.mu.Lock()
		n := min(len(p.queue), maxPipeline)
		if n == 0 {
			p.flushers--
			p.mu.Unlock()
			return
		}
		batch := p.queue[:n:n]
		if n == len(p.queue) {
			p.queue = nil
		} else {
			p.queue = p.queue[n:]
		}
		p.mu.Unlock()
		p.send(batch)
	}
}

// send runs one pipeline and hands every call its reply. Calls whose
// caller has already left are dropped first. The calls are packed, up to
// maxPack at a time, into single script calls (see packing), which spares
// Redis most of its per-call cost. Commands Redis answers with NOSCRIPT (it restarted, or its script
// cache was flushed) are sent again after the script is loaded, in one
// more round trip: NOSCRIPT means nothing of that command ran.
func (p *pipe) send(batch []*call) {
	live := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.finish(nil, err)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	units := p.units(live)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	cmds := p.exec(ctx, units)
	var again [][]*call
	for i, u := range units {
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
			for _, c := range u {
				c.finish(nil, err)
			}
		}
		return
	}
	cmds = p.exec(ctx, again)
	for i, u := range again {
		deliver(u, cmds[i])
	}
}

// units splits calls into the groups that become one script call each,
// as p.packing allows.
func (p *pipe) units(calls []*call) [][]*call {
	var units [][]*call
	packable := calls
	switch p.packing {
	case packNone:
		packable = nil
		for _, c := range calls {
			units = append(units, []*call{c})
		}
	case packInline:
		packable = make([]*call, 0, len(calls))
		for _, c := range calls {
			if len(c.keys) == 1 {
				packable = append(packable, c)
			} else {
				units = append(units, []*call{c})
			}
		}
	}
	for len(packable) > 0 {
		n := min(maxPack, len(packable))
		units = append(units, packable[:n:n])
		packable = packable[n:]
	}
	return units
}

// exec sends one EVALSHA per unit as one pipeline. Every command gets its
// own reply or error, also when the connection fails (then all of them).
func (p *pipe) exec(ctx context.Context, units [][]*call) []*goredis.Cmd {
	pl := p.node.Pipeline()
	cmds := make([]*goredis.Cmd, len(units))
	for i, u := range units {
		keys, args := u[0].keys, u[0].args
		switch {
		case len(u) == 1:
		case p.packing == packInline:
			keys, args = packedInline(u)
		default:
			keys, args = packed(u)
		}
		cmds[i] = pl.EvalSha(ctx, p.script.Hash(), keys, args...)
	}
	_, _ = pl.Exec(ctx) // each command holds its own error
	return cmds
}

// packed builds the keys and arguments of one M call carrying the calls
// of u: the margin once (one source, one margin), then per call its
// operation, its number of keys, and the rest of its own arguments (see
// bucket.lua and appendHeader).
func packed(u []*call) ([]string, []any) {
	nk, na := 0, 2
	for _, c := range u {
		nk += len(c.keys)
		na += len(c.args)
	}
	keys := make([]string, 0, nk)
	args := make([]any, 0, na)
	args = append(args, opMulti, u[0].args[1])
	for _, c := range u {
		keys = append(keys, c.keys...)
		args = c.appendPacked(args, false)
	}
	return keys, args
}

// packedInline builds the arguments of one P call carrying the one-key
// calls of u: the margin once, then per call its operation, its number of
// keys (1), its key, and the rest of its own arguments. No key is
// declared.
func packedInline(u []*call) ([]string, []any) {
	na := 2
	for _, c := range u {
		na += len(c.args) + len(c.keys)
	}
	args := make([]any, 0, na)
	args = append(args, opPackedInline, u[0].args[1])
	for _, c := range u {
		args = c.appendPacked(args, true)
	}
	return nil, args
}

// foldedToken returns the token that stands for the call's operation and
// mode in a packed call (bucket.lua, FOLD_OP) when the call is a one-key
// spend, whose arguments are the header and one key's spend values. The
// tokens are constants, so appending one allocates nothing.
func (c *call) foldedToken() (any, bool) {
	if len(c.keys) != 1 || len(c.args) != headerArgs+spendArgsPerKey {
		return nil, false
	}
	var tokens [3]any
	switch c.args[0] {
	case opSpend:
		tokens = [3]any{"S0", "S1", "S2"}
	case opCheck:
		tokens = [3]any{"C0", "C1", "C2"}
	default:
		return nil, false
	}
	mode, ok := c.args[headerArgs].(int64)
	if !ok || mode < 0 || mode >= int64(len(tokens)) {
		return nil, false
	}
	return tokens[mode], true
}

// appendPacked appends the call's batch to a packed call's arguments: its
// operation, its number of keys, its keys when inline, then its own
// arguments after the margin. A one-key spend is folded into a token for
// its operation and mode, its key when inline, its now, its increment and
// its burst offset (see appendHeader and appendSpendOp).
func (c *call) appendPacked(args []any, inline bool) []any {
	if token, ok := c.foldedToken(); ok {
		args = append(args, token)
		if inline {
			args = append(args, c.keys[0])
		}
		// After the operation and margin: now (two limbs), then, past the
		// mode, the increment and the burst offset.
		return append(args, c.args[2], c.args[3], c.args[headerArgs+1], c.args[headerArgs+2])
	}
	args = append(args, c.args[0], len(c.keys))
	if inline {
		for _, k := range c.keys {
			args = append(args, k)
		}
	}
	return append(args, c.args[2:]...)
}

// deliver hands the calls of a unit their replies from its command. A
// packed call's reply is its batches' replies one after another in one
// flat list (bucket.lua): 1 + n items for a batch of n keys, 1 for a reset.
func deliver(u []*call, cmd *goredis.Cmd) {
	reply, err := cmd.Result()
	if len(u) == 1 || err != nil {
		for _, c := range u {
			c.finish(reply, err)
		}
		return
	}
	items, ok := reply.([]any)
	width := 0
	for _, c := range u {
		width += c.replyWidth()
	}
	if !ok || len(items) != width {
		err := fmt.Errorf("%w: %d reply items for %d packed batches of %d", ErrBadReply, len(items), len(u), width)
		for _, c := range u {
			c.finish(nil, err)
		}
		return
	}
	for _, c := range u {
		w := c.replyWidth()
		mine := items[:w:w]
		items = items[w:]
		switch e, isErr := mine[0].(error); {
		case isErr:
			c.finish(nil, e)
		case w == 1:
			c.finish(mine[0], nil)
		default:
			c.finish(mine, nil)
		}
	}
}

// replyWidth is how many items the call's batch takes in a packed reply:
// a reset answers one number, the other operations a verdict and a TAT
// per key.
func (c *call) replyWidth() int {
	if c.args[0] == opReset {
		return 1
	}
	return 1 + len(c.keys)
}

// finish hands a call its answer; the caller may have left already.
func (c *call) finish(reply any, err error) {
	c.reply, c.err = reply, err
	close(c.done)
}

func isNoScript(err error) bool {
	return strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// isRedirect reports a cluster error that the cluster client handles by
// itself (following MOVED and ASK, reloading the slot map): a call sent to
// the node that owned its slot a moment ago. ErrClosed is here too, since
// the cluster client closes the clients of nodes that left, and so are
// Redis's answers to a packed call's batch whose undeclared key the node
// does not serve, or that ran while the node saw the cluster down (see
// packInline): the same call with its key declared would have been
// answered MOVED, ASK or CLUSTERDOWN before running.
func isRedirect(err error) bool {
	if errors.Is(err, goredis.ErrClosed) {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") ||
		strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "CLUSTERDOWN") ||
		strings.Contains(msg, nonLocalKey) || strings.Contains(msg, slotNotServed) ||
		strings.Contains(msg, scriptClusterDown)
}

// pipes holds the coalescer of every cluster master a source talks to,
// made on first use. A master that leaves the cluster keeps its (idle)
// entry: there are only ever a handful.
type pipes struct {
	script  *goredis.Script
	timeout time.Duration
	byNode  sync.Map // *goredis.Client -> *pipe
}

func (ps *pipes) forNode(node *goredis.Client) *pipe {
	if p, ok := ps.byNode.Load(node); ok {
		return p.(*pipe)
	}
	p, _ := ps.byNode.LoadOrStore(node, newPipe(node, ps.script, packInline, ps.timeout))
	return p.(*pipe)
}
