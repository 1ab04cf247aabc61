package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// smallBatch is the batch size whose TATs live in a stack array.
const smallBatch = 8

// Source keeps buckets in one Redis or a Redis Cluster. It is safe for
// concurrent use; its zero value is not usable (call New).
type Source struct {
	client  goredis.UniversalClient
	cluster bool
	script  *goredis.Script
	// single coalesces the calls to a standalone Redis; nodes those to
	// each cluster master (see coalesce.go).
	single *pipe
	nodes  *pipes
	format keyFormat
	// namespace is Options.Namespace, which idempotency records' keys
	// carry too.
	namespace string
	marginMS  int64
	// rollbackTimeout bounds giving back a denied multi-slot batch's
	// tokens, which must be tried even when the caller's deadline has
	// passed.
	rollbackTimeout time.Duration
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
		script:          goredis.NewScript(scriptFor(opts.Groups)),
		format:          keyFormat{prefix: KeyPrefix + opts.Namespace},
		namespace:       opts.Namespace,
		marginMS:        opts.expiryMargin().Milliseconds(),
		rollbackTimeout: opts.rollbackTimeout(),
	}
	if opts.Groups > 0 {
		s.format = keyFormat{prefix: GroupedKeyPrefix + opts.Namespace, groups: uint64(opts.Groups)}
	}
	if opts.Cluster {
		s.client = goredis.NewClusterClient(opts.clusterOptions())
		s.nodes = &pipes{script: s.script, timeout: opts.rollbackTimeout()}
	} else {
		c := goredis.NewClient(opts.clientOptions())
		s.client = c
		s.single = newPipe(c, s.script, packKeys, opts.rollbackTimeout())
	}
	return s, nil
}

// Spend implements ratelimits.Source: the batch is decided and written
// by one script call (one per hash slot on a cluster, see spendSlots).
func (s *Source) Spend(ctx context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error {
	keys, err := s.keys(ops)
	if err != nil {
		return err
	}
	if s.cluster && !sameSlot(keys) {
		return s.spendSlots(ctx, now, ops, keys, outcomes)
	}
	var buf [smallBatch]int64
	tats := tatBuffer(buf[:], len(ops))
	verdict, err := s.runSpend(ctx, now, ops, keys, tats, true)
	if err != nil {
		return err
	}
	if gcra.SpendBatch(now, ops, tats, outcomes) != verdict {
		return fmt.Errorf("%w: script says allowed=%v", ErrVerdictMismatch, verdict)
	}
	return nil
}

// Refund implements ratelimits.Source.
func (s *Source) Refund(ctx context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error {
	keys, err := s.keys(ops)
	if err != nil {
		return err
	}
	var buf [smallBatch]int64
	tats := tatBuffer(buf[:], len(ops))
	if s.cluster && !sameSlot(keys) {
		err = s.refundSlots(ctx, now, ops, keys, tats)
	} else {
		var decBuf [smallBatch]int64
		decs := tatBuffer(decBuf[:], len(ops))
		for i := range ops {
			decs[i] = refundDecrement(&ops[i])
		}
		err = s.runRefund(ctx, now, keys, decs, tats)
	}
	if err != nil {
		return err
	}
	gcra.RefundBatch(now, ops, tats, outcomes)
	return nil
}

// Reset implements ratelimits.Source: the keys are deleted, and those
// whose TAT was after now are counted.
func (s *Source) Reset(ctx context.Context, now int64, keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	rkeys := make([]string, len(keys))
	for i, k := range keys {
		if err := s.checkKey(k); err != nil {
			return 0, err
		}
		rkeys[i] = s.format.name(k)
	}
	if s.cluster && !sameSlot(rkeys) {
		return s.resetSlots(ctx, now, rkeys)
	}
	return s.runReset(ctx, now, rkeys)
}

// Ping implements ratelimits.Source. On a cluster every master must
// answer, since any of them may hold the next batch's buckets.
func (s *Source) Ping(ctx context.Context) error {
	var err error
	if cc, ok := s.client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
			return c.Ping(ctx).Err()
		})
	} else {
		err = s.client.Ping(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("redis source: ping: %w", err)
	}
	return nil
}

// Close implements ratelimits.Source: it closes the connections.
func (s *Source) Close() error {
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
// in format v1, where a bucket's key holds its TAT.
func (s *Source) Field(bucket string) string {
	_, field := s.format.key(bucket)
	return field
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

// keys checks ops and returns their Redis keys, in order.
func (s *Source) keys(ops []gcra.Op) ([]string, error) {
	keys := make([]string, len(ops))
	for i := range ops {
		if err := checkOp(&ops[i]); err != nil {
			return nil, err
		}
		if err := s.checkKey(ops[i].Key); err != nil {
			return nil, err
		}
		keys[i] = s.format.name(ops[i].Key)
	}
	return keys, nil
}

// runSpend runs the spend script on keys (all in one slot) and fills tats
// with the TATs it read. With write unset it only reads and decides.
func (s *Source) runSpend(ctx context.Context, now int64, ops []gcra.Op, keys []string, tats []int64, write bool) (bool, error) {
	op := opCheck
	if write {
		op = opSpend
	}
	args := make([]any, 0, headerArgs+spendArgsPerKey*len(ops))
	args = appendHeader(args, op, now, s.marginMS)
	for i := range ops {
		args = appendSpendOp(args, &ops[i])
	}
	reply, err := s.eval(ctx, keys, args)
	if err != nil {
		return false, fmt.Errorf("redis source: spend: %w", err)
	}
	return parseReply(reply, now, tats)
}

// runRefund runs the refund script on keys (all in one slot), moving
// each key's TAT back by decs[i] but never before now, and fills tats with
// the TATs it read.
func (s *Source) runRefund(ctx context.Context, now int64, keys []string, decs, tats []int64) error {
	args := make([]any, 0, headerArgs+refundArgsPer*len(keys))
	args = appendHeader(args, opRefund, now, s.marginMS)
	for _, dec := range decs {
		args = append(args, dec)
	}
	reply, err := s.eval(ctx, keys, args)
	if err != nil {
		return fmt.Errorf("redis source: refund: %w", err)
	}
	_, err = parseReply(reply, now, tats)
	return err
}

// runReset runs the reset script on keys (all in one slot).
func (s *Source) runReset(ctx context.Context, now int64, keys []string) (int, error) {
	args := appendHeader(make([]any, 0, headerArgs), opReset, now, s.marginMS)
	reply, err := s.eval(ctx, keys, args)
	if err != nil {
		return 0, fmt.Errorf("redis source: reset: %w", err)
	}
	n, ok := reply.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: reset answered %T", ErrBadReply, reply)
	}
	return int(n), nil
}

// eval runs the script once on keys (all in one slot), sharing a round
// trip with concurrent calls to the same node (coalesce.go).
func (s *Source) eval(ctx context.Context, keys []string, args []any) (any, error) {
	if !s.cluster {
		reply, err := s.single.do(ctx, keys, args)
		return reply, classify(err)
	}
	node, err := s.client.(*goredis.ClusterClient).MasterForKey(ctx, keys[0])
	if err != nil {
		return nil, classify(err)
	}
	reply, err := s.evalOn(ctx, node, keys, args)
	return reply, classify(err)
}

// evalOn runs the script on keys through the coalescer of node, the master
// the cluster client last knew to serve their slot.
func (s *Source) evalOn(ctx context.Context, node *goredis.Client, keys []string, args []any) (any, error) {
	reply, err := s.nodes.forNode(node).do(ctx, keys, args)
	if err != nil && isRedirect(err) {
		// The slot moved (or its master left) since the cluster client
		// last looked: let it follow the redirect and refresh its map.
		// Where it was sent, the call changed nothing any answer can tell
		// (see packInline).
		return s.script.Run(ctx, s.client, keys, args...).Result()
	}
	return reply, err
}

// tatBuffer returns n int64 slots, from buf when they fit.
func tatBuffer(buf []int64, n int) []int64 {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]int64, n)
}
