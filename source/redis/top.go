package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// maxTopPayload bounds what one process may push as its top lists: the
// lists are bounded by the configuration (limits × windows × counters),
// and a payload beyond this says something is wrong, not that it should
// be stored.
const maxTopPayload = 4 << 20

// topKeys are the keys of the processes' top lists: one string per
// process, expiring unless pushed again, and a set naming them. All share
// the hash tag {top}, so that on a cluster they live in one slot and one
// node answers a read.
func (s *Source) topKeys(process string) (index, payload string) {
	base := s.format.prefix + "{top}:"
	return base + "procs", base + "p:" + process
}

// PushTop stores this process's top lists under process until ttl has
// passed, and names it in the index of live processes.
func (s *Source) PushTop(ctx context.Context, process string, payload []byte, ttl time.Duration) error {
	if len(payload) > maxTopPayload {
		return errors.New("redis source: top lists over 4 MiB not pushed")
	}
	index, key := s.topKeys(process)
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, key, payload, ttl)
		p.SAdd(ctx, index, process)
		// The index outlives every process's own key by little, so a
		// fleet that is gone leaves nothing behind for long.
		p.Expire(ctx, index, 2*ttl)
		return nil
	})
	return err
}

// PullTops returns the top lists of every process whose push has not
// expired, this one's included, and drops the expired ones from the
// index. The index holds one name per live process, so a read is bounded
// by the fleet's size.
func (s *Source) PullTops(ctx context.Context) ([][]byte, error) {
	index, _ := s.topKeys("")
	procs, err := s.client.SMembers(ctx, index).Result()
	if err != nil || len(procs) == 0 {
		return nil, err
	}
	keys := make([]string, len(procs))
	for i, p := range procs {
		_, keys[i] = s.topKeys(p)
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	var out [][]byte
	var gone []any
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			gone = append(gone, procs[i])
			continue
		}
		out = append(out, []byte(str))
	}
	if len(gone) > 0 {
		// Best effort: a process whose key expired is read as gone
		// whether or not this succeeds.
		_ = s.client.SRem(ctx, index, gone...).Err()
	}
	return out, nil
}
