package local

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/syncpush"
)

// Front is the layer in front of a shared source, as the Limiter's
// ratelimits.Source: of every batch and ERL call it counts here the window
// and rate-counter ops (counters, box) whose SyncRate is not 0, hands the
// others to the inner source, and answers as one source would
// (docs/design.md, "Mixed batches"). Make it with Layer.Front.
type Front struct {
	layer *Layer
	inner ratelimits.Source
}

// Front returns l in front of inner, the shared source as the Limiter
// would use it (its Syncer is the same source, as opened).
func (l *Layer) Front(inner ratelimits.Source) *Front {
	return &Front{layer: l, inner: inner}
}

// ErrIdempotency refuses SpendOnce and RefundOnce of a batch with an op
// counted here. An idempotency record must be kept in the same atomic
// step as the writes it guards, and a retry may reach another process: no
// record can promise that such a limit counts the call once. It wraps
// ratelimits.ErrInvalidIdempotencyKey, so callers answer it as a client
// error.
var ErrIdempotency = fmt.Errorf("%w: a limit with a sync_rate other than 0 is counted in each process's memory, where no idempotency record can be kept; send the batch without an idempotency key", ratelimits.ErrInvalidIdempotencyKey)

// counted reports whether op is counted here.
func counted(op *bucket.Op) bool {
	return op.SyncRate != 0 && (op.Algorithm.Windowed() || op.Algorithm == bucket.RateCounter)
}

// part is one side of a batch, in request order: its ops, their outcomes,
// and each op's index in the batch (nil when the part is the whole batch,
// whose outcomes are then the batch's own).
type part struct {
	ops      []bucket.Op
	outcomes []bucket.Outcome
	at       []int
}

// split cuts a batch into the ops counted here and the inner source's.
// A batch all on one side is not copied.
func split(ops []bucket.Op, outcomes []bucket.Outcome) (here, there part) {
	n := 0
	for i := range ops {
		if counted(&ops[i]) {
			n++
		}
	}
	if whole := (part{ops: ops, outcomes: outcomes}); n == 0 || n == len(ops) {
		if n == 0 {
			return part{}, whole
		}
		return whole, part{}
	}
	for i := range ops {
		p := &there
		if counted(&ops[i]) {
			p = &here
		}
		p.ops, p.at = append(p.ops, ops[i]), append(p.at, i)
	}
	here.outcomes, there.outcomes = make([]bucket.Outcome, n), make([]bucket.Outcome, len(ops)-n)
	return here, there
}

// scatter copies p's outcomes to their places in the batch's.
func (p *part) scatter(outcomes []bucket.Outcome) {
	for j, i := range p.at {
		outcomes[i] = p.outcomes[j]
	}
}

// innerContext bounds one call to the inner source (Options.SourceTimeout).
func (f *Front) innerContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d := f.layer.opts.SourceTimeout; d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// Spend implements ratelimits.Source. A mixed batch is decided here first,
// writing nothing. When this part is allowed, the inner part runs, and this
// part's window costs are written only when that was allowed too; its
// rate-counter hits and box entries are written in every case, as
// bucket.SpendBatch writes them in a denied batch.
//
// When this part denies the batch, its denial (whose retry time is never
// 0) decides it, and the inner part goes to observe: its ops answer with
// their own figures and write what a denied batch writes, and nothing
// else.
func (f *Front) Spend(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	here, there := split(ops, outcomes)
	switch {
	case len(here.ops) == 0:
		ctx, cancel := f.innerContext(ctx)
		defer cancel()
		return f.inner.Spend(ctx, now, ops, outcomes)
	case len(there.ops) == 0:
		f.layer.spend(now, ops, outcomes)
		return nil
	}
	defer here.scatter(outcomes)
	defer there.scatter(outcomes)
	if !f.layer.decide(now, here.ops, here.outcomes) {
		if slices.ContainsFunc(here.outcomes, func(o bucket.Outcome) bool { return o.Write || o.WriteBox }) {
			f.layer.commit(now, here.ops, here.outcomes) // hits and boxings only: the batch is denied
		}
		f.observe(ctx, now, there.ops, there.outcomes)
		return nil
	}
	ictx, cancel := f.innerContext(ctx)
	defer cancel()
	if err := f.inner.Spend(ictx, now, there.ops, there.outcomes); err != nil {
		return err
	}
	if !batchAllowed(there.ops, there.outcomes) {
		for i := range here.ops {
			if here.ops[i].Algorithm != bucket.RateCounter {
				here.outcomes[i].Write = false
			}
		}
	}
	f.layer.commit(now, here.ops, here.outcomes)
	return nil
}

// observe decides the inner part of a batch that a denial here decided,
// as that denied batch would decide it on one source: every op answers
// with its own figures, rate-counter hits are counted and ids boxed, and
// no bucket, window or lease is written. The inner source writes a
// batch's buckets whenever that batch is allowed, so the ops go in a
// batch of their own with every op but the rate counters' made
// check-only, whose answers are the figures of a spend without its
// write. A spend-only op goes without its box too: it never boxes
// anyone, and a check would answer its denial as boxed (an id already in
// that box then answers its bucket's figures, not the box's: only an ERL
// add puts one there). A check boxes nobody, so the ids that a
// check-and-spend op's own denial boxes are then boxed on the inner
// source, as its sync pushes a box entry (the later expiry wins); an id
// already in the box, whose check answered the box's own expiry, is left
// as it is. The batch is denied whatever the inner source says, so its
// failure only leaves the inner part's answers zero.
func (f *Front) observe(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) {
	checks := slices.Clone(ops)
	for i := range checks {
		if checks[i].Algorithm == bucket.RateCounter {
			continue
		}
		if checks[i].Mode == bucket.SpendOnly {
			checks[i].Box = ""
		}
		checks[i].Mode = bucket.CheckOnly
	}
	cctx, cancel := f.innerContext(ctx)
	defer cancel()
	if err := f.inner.Spend(cctx, now, checks, outcomes); err != nil {
		clear(outcomes)
		return
	}
	var boxes []syncpush.Rate
	for i := range ops {
		op, o := &ops[i], &outcomes[i]
		if op.Algorithm != bucket.RateCounter && op.Mode == bucket.CheckAndSpend && op.Box != "" && o.Penalized && now+o.RetryIn == op.BoxUntil {
			boxes = append(boxes, syncpush.Rate{Box: op.Box, BoxExpires: op.BoxUntil})
		}
	}
	if len(boxes) > 0 && f.layer.rates != nil {
		bctx, cancel := f.innerContext(ctx)
		defer cancel()
		// A failure leaves the ids unboxed, as a lost write would.
		_ = f.layer.rates.SyncRates(bctx, now, boxes)
	}
}

// batchAllowed reports whether every op that counts toward a batch's
// decision was allowed.
func batchAllowed(ops []bucket.Op, outcomes []bucket.Outcome) bool {
	for i := range ops {
		if ops[i].Mode.Counts() && !outcomes[i].Allowed {
			return false
		}
	}
	return true
}

// Refund implements ratelimits.Source. This part is given back here and,
// for limits above 0, on the inner source too when the hits this process
// has not pushed do not cover it (Layer.refund); the inner part, and what
// the inner source gives back of this part, go in one call to it, so that
// a failure of the inner source fails the whole refund with nothing
// changed, and it can be retried.
func (f *Front) Refund(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	here, there := split(ops, outcomes)
	if len(here.ops) == 0 {
		ctx, cancel := f.innerContext(ctx)
		defer cancel()
		return f.inner.Refund(ctx, now, ops, outcomes)
	}
	inner := func(ctx context.Context, shared []bucket.Op) error {
		if len(there.ops)+len(shared) == 0 {
			return nil
		}
		all, outs := there.ops, there.outcomes
		if len(shared) > 0 {
			all = append(slices.Clip(there.ops), shared...)
			outs = make([]bucket.Outcome, len(all))
		}
		ctx, cancel := f.innerContext(ctx)
		defer cancel()
		if err := f.inner.Refund(ctx, now, all, outs); err != nil {
			return err
		}
		copy(there.outcomes, outs) // the inner part's; the rest is decided here
		return nil
	}
	if err := f.layer.refund(ctx, now, here.ops, here.outcomes, inner); err != nil {
		return err
	}
	here.scatter(outcomes)
	there.scatter(outcomes)
	return nil
}

// SpendOnce implements ratelimits.Source: a batch with an op counted here
// is refused (ErrIdempotency, in a *ratelimits.TransactionError naming the
// op); any other goes to the inner source.
func (f *Front) SpendOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	return f.once(ctx, f.inner.SpendOnce, now, rec, ops, outcomes)
}

// RefundOnce implements ratelimits.Source, as SpendOnce does.
func (f *Front) RefundOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	return f.once(ctx, f.inner.RefundOnce, now, rec, ops, outcomes)
}

func (f *Front) once(ctx context.Context, inner func(context.Context, int64, once.Record, []bucket.Op, []bucket.Outcome) (bool, error),
	now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	for i := range ops {
		if counted(&ops[i]) {
			return false, &ratelimits.TransactionError{Index: i, Err: ErrIdempotency}
		}
	}
	ctx, cancel := f.innerContext(ctx)
	defer cancel()
	return inner(ctx, now, rec, ops, outcomes)
}

// Reset implements ratelimits.Source: the ops counted here are forgotten
// here, and the inner source resets the others and those above 0, whose
// totals it keeps, while no cycle of their groups runs (Layer.reset).
func (f *Front) Reset(ctx context.Context, now int64, ops []bucket.Op) (int, error) {
	here, _ := split(ops, nil)
	inner := func(ctx context.Context) (int, error) {
		var there, counters, boxes []bucket.Op
		for i := range ops {
			op := ops[i]
			switch {
			case counted(&op) && op.SyncRate <= 0:
			case op.Algorithm.Windowed() && op.SyncRate > 0 && op.Box != "":
				// The syncs add a window's hits to the counter named by its
				// key alone, whatever its box (SyncWindows), and its box
				// entries to its box: the counters are reset as windows
				// without a box, and the box entries with the ops as they
				// are (whose own keys hold nothing: such a limit is never
				// spent on the source).
				counter := op
				counter.Box = ""
				counters, boxes = append(counters, counter), append(boxes, op)
			default:
				there = append(there, op)
			}
		}
		ctx, cancel := f.innerContext(ctx)
		defer cancel()
		applied := false
		reset := func(ops []bucket.Op) (int, error) {
			if len(ops) == 0 {
				return 0, nil
			}
			n, err := f.inner.Reset(ctx, now, ops)
			if err != nil && applied {
				return 0, partlyApplied(err)
			}
			applied = applied || err == nil
			return n, err
		}
		n, err := reset(there)
		if err != nil {
			return 0, err
		}
		// A window with a box counts once for its counter and its entry.
		// The two calls' counts do not say which entry went with which
		// counter: for one window that is exact; for several, those this
		// process saw holding both are counted once, within what the
		// counts allow.
		both := 0
		for i := range boxes {
			if f.layer.holdsBoth(now, &boxes[i]) {
				both++
			}
		}
		nc, err := reset(counters)
		if err != nil {
			return 0, err
		}
		nb, err := reset(boxes)
		if err != nil {
			return 0, err
		}
		if len(boxes) == 1 {
			return n + max(nc, nb), nil
		}
		return n + max(nc, nb, nc+nb-both), nil
	}
	if len(here.ops) == 0 {
		return inner(ctx)
	}
	return f.layer.reset(ctx, now, here.ops, inner)
}

// Call implements ratelimits.Source. A call whose counters and box are all
// counted here, or all on the inner source, is one atomic step there. One
// that mixes the two takes up to three steps: the counters of each place,
// then the box, boxed (BoxExtend) when a counter went above.
func (f *Front) Call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	n, here := len(call.Counters), call.BoxSyncRate != 0
	onePlace := n == 0 || call.Action == bucket.BoxNone || (call.Counters[0].SyncRate != 0) == here
	for i := range n {
		onePlace = onePlace && (call.Counters[i].SyncRate != 0) == (call.Counters[0].SyncRate != 0)
	}
	if onePlace {
		return f.callIn(ctx, now, call, res)
	}
	above := false
	for i := range n {
		sub := bucket.Call{Counters: call.Counters[i : i+1]}
		var sr bucket.CallResult
		if err := f.callIn(ctx, now, &sub, &sr); err != nil {
			return err
		}
		res.Counters[i], res.Above[i] = sr.Counters[0], sr.Above[0]
		above = above || sr.Above[0]
	}
	box := bucket.Call{Box: call.Box, Action: call.Action, Until: call.Until, BoxCapacity: call.BoxCapacity, BoxSyncRate: call.BoxSyncRate}
	if box.Action == bucket.BoxWhenAbove {
		box.Action = bucket.BoxRead
		if above {
			box.Action = bucket.BoxExtend
		}
	}
	var br bucket.CallResult
	if err := f.callIn(ctx, now, &box, &br); err != nil {
		return err
	}
	res.Expires, res.Removed = br.Expires, br.Removed
	return nil
}

// callIn applies a call that lives in one place: here or on the inner
// source.
func (f *Front) callIn(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	here := call.BoxSyncRate != 0
	if len(call.Counters) > 0 {
		here = call.Counters[0].SyncRate != 0
	}
	if here {
		return f.layer.call(ctx, now, call, res)
	}
	ctx, cancel := f.innerContext(ctx)
	defer cancel()
	return f.inner.Call(ctx, now, call, res)
}

// Ping implements ratelimits.Source: the inner source's.
func (f *Front) Ping(ctx context.Context) error {
	ctx, cancel := f.innerContext(ctx)
	defer cancel()
	return f.inner.Ping(ctx)
}

// Close implements ratelimits.Source: it closes the inner source. The
// layer's own Close pushes what it holds, and comes first.
func (f *Front) Close() error { return f.inner.Close() }

var _ ratelimits.Source = (*Front)(nil)

// errPartlyApplied marks the failure of a call made in steps after one of
// them took effect (partlyApplied).
var errPartlyApplied = errors.New("local: a step failed after an earlier one took effect")

// partlyApplied is the error of a call made in steps after one of them
// took effect: whatever err says, the call is not one that changed
// nothing, so it no longer wraps ratelimits.ErrNotApplied (a retry must
// not take it for one that can be made again as if new). It wraps
// errPartlyApplied, which Layer.reset acts on.
func partlyApplied(err error) error {
	return fmt.Errorf("%w: %s", errPartlyApplied, err.Error())
}
