package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jmhodges/clock"
	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// Source keeps buckets in one Redis or a Redis Cluster. It is safe for
// concurrent use; its zero value is not usable (call New).
type Source struct {
	client  goredis.UniversalClient
	cluster bool
	script  *goredis.Script
	wire    wire
	// single coalesces the calls to a standalone Redis; nodes those to
	// each cluster master (see pipe.go).
	single *pipe
	nodes  *pipes
	format keyFormat
	// namespace is Options.Namespace, which idempotency records' keys
	// carry too.
	namespace string
	// rollbackTimeout bounds giving back a denied multi-slot batch's
	// tokens, which must be tried even when the caller's deadline has
	// passed.
	rollbackTimeout time.Duration
	// apart counts the work finishApart runs past its callers, which
	// Close waits for; closed, under apartMu, says Close has begun, after
	// which work runs in its caller (a WaitGroup must not gain work while
	// it is waited on).
	apartMu sync.Mutex
	closed  bool
	apart   sync.WaitGroup
}

// New connects a source as opts describe. It does not wait for Redis to
// answer: a source made while Redis is down fails its calls until Redis
// is back, and Ping tells when it is.
func New(opts Options) (*Source, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Source{
		cluster:         opts.Cluster,
		script:          goredis.NewScript(bucketLua),
		format:          keyFormat{prefix: KeyPrefix + opts.Namespace},
		namespace:       opts.Namespace,
		rollbackTimeout: opts.rollbackTimeout(),
	}
	format := scriptFormatV1
	if opts.Groups > 0 {
		s.format = keyFormat{prefix: GroupedKeyPrefix + opts.Namespace, groups: uint64(opts.Groups)}
		format = scriptFormatV2
	}
	s.wire = newWire(opts.expiryMargin().Milliseconds(), format, opts.BinaryTATs)
	if opts.Cluster {
		s.client = goredis.NewClusterClient(opts.clusterOptions())
		s.nodes = &pipes{script: s.script, wire: s.wire, timeout: opts.rollbackTimeout(), window: opts.CoalesceWindow, clock: clock.Default()}
	} else {
		c := goredis.NewClient(opts.clientOptions())
		s.client = c
		s.single = &pipe{node: c, script: s.script, wire: s.wire, packing: packKeys, timeout: opts.rollbackTimeout(),
			window: opts.CoalesceWindow, clock: clock.Default()}
	}
	return s, nil
}

// Spend implements ratelimits.Source: the batch is decided and written
// by one script call (one per hash slot on a cluster, see spendSlots).
func (s *Source) Spend(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	keys, boxes, err := s.keys(ops, now)
	if err != nil {
		return err
	}
	if s.cluster && !sameSlot(keys) {
		return s.spendSlots(ctx, now, ops, keys, boxes, outcomes)
	}
	var buf [smallBatch]bucket.State
	r, err := s.run(ctx, &scriptCall{op: opSpend, now: now, keys: keys, boxes: boxes, ops: ops}, stateBuffer(buf[:], len(ops)))
	if err != nil {
		return err
	}
	return r.spendOutcomes(outcomes)
}

// Refund implements ratelimits.Source.
func (s *Source) Refund(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	keys, boxes, err := s.keys(ops, now)
	if err != nil {
		return err
	}
	var buf [smallBatch]bucket.State
	states := stateBuffer(buf[:], len(ops))
	if s.cluster && !sameSlot(keys) {
		err = s.refundSlots(ctx, now, ops, keys, boxes, states)
	} else {
		var amountBuf [smallBatch]int64
		amounts := amountBuffer(amountBuf[:], len(ops))
		for i := range ops {
			amounts[i] = refundAmount(&ops[i])
		}
		_, err = s.run(ctx, &scriptCall{op: opRefund, now: now, keys: keys, boxes: boxes, ops: ops, amounts: amounts}, states)
	}
	if err != nil {
		return err
	}
	bucket.RefundBatch(now, ops, states, outcomes)
	return nil
}

// Reset implements ratelimits.Source: the keys, and the box entries of
// ops with a box, are deleted, and the ops that still counted something
// at now (bucket.Busy: a GCRA bucket whose TAT was after now, a window or
// rate counter with hits that count, an id in its box) are counted.
func (s *Source) Reset(ctx context.Context, now int64, ops []bucket.Op) (int, error) {
	if len(ops) == 0 {
		return 0, nil
	}
	rkeys := make([]string, len(ops))
	var boxes []string
	for i := range ops {
		op := &ops[i]
		if err := s.checkKey(op.Key); err != nil {
			return 0, err
		}
		switch {
		case op.Algorithm.Windowed():
			if err := checkPeriod(op.Key, op.Window.Period); err != nil {
				return 0, err
			}
		case op.Algorithm == bucket.Calendar:
			if err := checkOp(op); err != nil {
				return 0, err
			}
		case op.Algorithm == bucket.RateCounter && op.Box == "":
			return 0, fmt.Errorf("%w: %q: a rate counter without a box", ErrInvalidOp, op.Key)
		case op.Algorithm == bucket.Concurrency && op.Box != "":
			return 0, fmt.Errorf("%w: %q: a concurrency limit with a box", ErrInvalidOp, op.Key)
		case op.Algorithm != bucket.GCRA && op.Algorithm != bucket.RateCounter && op.Algorithm != bucket.Concurrency:
			return 0, fmt.Errorf("%w: %q: algorithm %d", ErrInvalidOp, op.Key, op.Algorithm)
		}
		var err error
		if rkeys[i], boxes, err = s.opNames(ops, i, boxes, now); err != nil {
			return 0, err
		}
	}
	if s.cluster && !sameSlot(rkeys) {
		return s.resetSlots(ctx, now, ops, rkeys, boxes)
	}
	r, err := s.run(ctx, &scriptCall{op: opReset, now: now, keys: rkeys, boxes: boxes, ops: ops}, nil)
	return r.busy, err
}

// Ping implements ratelimits.Source. On a cluster every master must
// answer, since any of them may hold the next batch's buckets.
func (s *Source) Ping(ctx context.Context) error {
	var err error
	if cc, ok := s.client.(*goredis.ClusterClient); ok {
		// ForEachMaster first reads the slot map again, trying the nodes in
		// random order: a hung node (a master a failover left behind) can
		// take the whole deadline, and the masters would then be pinged
		// with none left. The read gets half the time; the pings, which
		// use the cached map when the read fails, keep ctx.
		mapCtx := ctx
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			mapCtx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/2))
			defer cancel()
		}
		err = cc.ForEachMaster(mapCtx, func(_ context.Context, c *goredis.Client) error {
			return c.Ping(ctx).Err()
		})
	} else {
		err = s.pingStandalone(ctx)
	}
	if err != nil {
		return fmt.Errorf("redis source: ping: %w", err)
	}
	return nil
}

// ErrClusterNode is the ping of a redis:// source whose server runs in
// cluster mode. The source packs keys of many slots into one script call,
// which a cluster refuses (CROSSSLOT) even where one master serves every
// slot; and a node of several masters answers MOVED for the others'
// slots. Either way most calls would fail while PING succeeded.
var ErrClusterNode = errors.New("the server runs in cluster mode: name it with redis-cluster://, which serves a cluster of one master too")

// pingStandalone pings a standalone source's server, and asks it in the
// same round trip whether it runs in cluster mode. A server that refuses
// CLUSTER INFO (cluster support off, or an ACL that does not grant it) is
// not taken for one.
func (s *Source) pingStandalone(ctx context.Context) error {
	var ping *goredis.StatusCmd
	var info *goredis.StringCmd
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		ping = p.Ping(ctx)
		info = p.ClusterInfo(ctx)
		return nil
	})
	if err := ping.Err(); err != nil {
		return err
	}
	if info.Err() == nil {
		if err != nil {
			// Neither command failed, yet the call did: the connection's
			// setup (AUTH, SELECT) was refused before either ran.
			return err
		}
		return ErrClusterNode
	}
	return nil
}

// Close implements ratelimits.Source: it closes the connections.
func (s *Source) Close() error {
	// A give-back or record write under way runs to its end (at most the
	// rollback timeout) before the connections close under it.
	s.apartMu.Lock()
	s.closed = true
	s.apartMu.Unlock()
	s.apart.Wait()
	if err := s.client.Close(); err != nil && !errors.Is(err, goredis.ErrClosed) {
		return fmt.Errorf("redis source: close: %w", err)
	}
	return nil
}

// Key returns the Redis key a bucket is stored under (see docs/redis.md),
// for operators and tests that look into Redis. In key format v2 that key
// is a hash, and Field tells the bucket's field in it.
func (s *Source) Key(bucket string) string {
	key, _ := s.format.key(bucket)
	return key
}

// Field returns the field of a bucket in its hash in key format v2, or ""
// in format v1, where a bucket's key holds its TAT or window counter.
func (s *Source) Field(bucket string) string {
	_, field := s.format.key(bucket)
	return field
}

// EntryKey returns the Redis key, and in format v2 the field, that hold
// the rate counter under key, or the bucket under key of a limit with a
// penalty box (see docs/redis.md), for operators and tests that look into
// Redis. They are in the slot of the key's id.
func (s *Source) EntryKey(key string) (redisKey, field string) {
	return s.format.split(s.format.entryName(key))
}

// BoxKey returns the Redis key, and in format v2 the field, that hold the
// box entry under box (a key "<enum>:<id>", bucket.Op.Box), beside the
// id's counters and buckets.
func (s *Source) BoxKey(box string) (redisKey, field string) {
	return s.format.split(s.format.boxName(box))
}

// checkKey refuses a bucket key the format cannot store: in format v2 the
// empty one, whose field name the sweep of a hash keeps its record in
// (bucket keys are "<enum>:<id>", never empty).
func (s *Source) checkKey(bucket string) error {
	if bucket == "" && s.format.groups > 0 {
		return fmt.Errorf("%w: an empty bucket key", ErrInvalidOp)
	}
	return nil
}

// keys checks ops and returns their names for the script, in order, and
// the names of their box entries (nil when no op has a box). A calendar
// op's name is its counter's at now.
func (s *Source) keys(ops []bucket.Op, now int64) (keys, boxes []string, err error) {
	keys = make([]string, len(ops))
	for i := range ops {
		if err := checkOp(&ops[i]); err != nil {
			return nil, nil, err
		}
		if err := s.checkKey(ops[i].Key); err != nil {
			return nil, nil, err
		}
		if keys[i], boxes, err = s.opNames(ops, i, boxes, now); err != nil {
			return nil, nil, err
		}
	}
	return keys, boxes, nil
}

// opNames returns the name of op i's key, and boxes with the name of its
// box entry set (made on the first op that has one). An op without a box
// keeps its bucket's name (keyFormat.name); the key of an op with one,
// and its box entry, are named by the id (entryName, boxName), so that
// they share a slot. On a cluster a box entry of another id than its op's
// key (the Limiter's never is) would not, and is refused. A calendar op's
// name is that name followed by its period at now (calendarName), in the
// same slot.
func (s *Source) opNames(ops []bucket.Op, i int, boxes []string, now int64) (string, []string, error) {
	op := &ops[i]
	if op.Box == "" {
		if op.Algorithm == bucket.Calendar {
			return calendarName(s.format.name(op.Key), op, now), boxes, nil
		}
		return s.format.name(op.Key), boxes, nil
	}
	if boxes == nil {
		boxes = make([]string, len(ops))
	}
	key := s.format.entryName(op.Key)
	if op.Algorithm == bucket.Calendar {
		key = calendarName(key, op, now)
	}
	boxes[i] = s.format.boxName(op.Box)
	if s.cluster && Slot(boxes[i]) != Slot(key) {
		return "", nil, fmt.Errorf("%w: %q: box entry %q is in another hash slot", ErrInvalidOp, op.Key, op.Box)
	}
	return key, boxes, nil
}

// run sends c and decodes its reply into states (one slot per op of c).
// Spends, checks, refunds, resets, syncs and ERL calls share round trips
// with concurrent calls to the same node (pipe.go); idempotent calls and
// claims, which are rare, go alone.
func (s *Source) run(ctx context.Context, c *scriptCall, states []bucket.State) (scriptReply, error) {
	var reply any
	var err error
	if c.pipelined() {
		reply, err = s.eval(ctx, c)
	} else {
		reply, err = s.runAlone(ctx, c)
	}
	if c.op == opClaim && errors.Is(err, goredis.Nil) {
		reply, err = nil, nil // no live claim: one was made
	}
	if err != nil {
		return scriptReply{}, fmt.Errorf("redis source: %s: %w", c.op, err)
	}
	return decode(c, reply, states)
}

// spendOutcomes computes the outcomes of the spend batch that r answers,
// and checks that bucket.SpendBatch agrees with the script's verdict.
func (r *scriptReply) spendOutcomes(outcomes []bucket.Outcome) error {
	if bucket.SpendBatch(r.decidedAt, r.ops, r.states, outcomes) != r.allowed {
		return fmt.Errorf("%w: script says allowed=%v", ErrVerdictMismatch, r.allowed)
	}
	return nil
}

// eval runs c through the pipe of its node.
func (s *Source) eval(ctx context.Context, c *scriptCall) (any, error) {
	if !s.cluster {
		reply, err := s.single.do(ctx, c)
		return reply, classify(err)
	}
	cc := s.client.(*goredis.ClusterClient)
	node, err := cc.MasterForKey(ctx, c.keys[0])
	if err == nil {
		var reply any
		if reply, err = s.evalOn(ctx, node, c); err == nil {
			return reply, nil
		}
	}
	var replyErr goredis.Error
	if !errors.As(err, &replyErr) && !errors.Is(err, context.Canceled) {
		// The master did not answer: dead, hung, or replaced by its
		// replica in a failover, which no redirect will say. The slot map
		// is read again in the background (at most every 200ms however
		// many calls fail), so that calls stop going to a master that left
		// within moments of the cluster electing another, not at the
		// map's next periodic reload.
		cc.ReloadState(ctx)
	}
	return nil, classify(err)
}

// evalOn runs c through the pipe of node, the master the cluster client
// last knew to serve its slot.
func (s *Source) evalOn(ctx context.Context, node *goredis.Client, c *scriptCall) (any, error) {
	reply, err := s.nodes.forNode(node).do(ctx, c)
	if err != nil && isRedirect(err) {
		// The slot moved (or its master left) since the cluster client
		// last looked: let it follow the redirect and refresh its map.
		// Where it was sent, the call changed nothing any answer can tell
		// (see packInline).
		keys, args := s.wire.encode(c)
		return s.script.Run(ctx, s.client, keys, args...).Result()
	}
	return reply, err
}

// runAlone runs c once, not through a pipe.
func (s *Source) runAlone(ctx context.Context, c *scriptCall) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, notApplied(err)
	}
	keys, args := s.wire.encode(c)
	reply, err := s.script.Run(ctx, s.client, keys, args...).Result()
	return reply, classify(err)
}
