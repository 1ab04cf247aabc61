package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/source/syncpush"
)

var _ syncpush.BoxLog = (*Source)(nil)

// boxLogLength is about how many entries a box log keeps (XADD's MAXLEN
// ~): a process that falls further behind than that misses the oldest,
// which it then learns of as it would without a log, when it counts the
// id itself.
const boxLogLength = 10000

// boxLogFields names the two fields of a log entry: the box entry's key
// ("<enum>:<id>") and its expiry (unix ns, decimal).
const (
	boxLogBox     = "b"
	boxLogExpires = "e"
)

// boxLogName returns the key of the box log of limit name ("<enum>:"):
// the prefix and namespace, then "|boxlog" and the enum as the hash tag,
// so that one limit's log is one key in one slot. No other name of the
// format has anything but '{' after the prefix.
func (f keyFormat) boxLogName(name string) string {
	return f.prefix + "|boxlog{" + strings.TrimSuffix(name, ":") + "}"
}

// BoxLogKey returns the Redis key of the box log of the limit name
// ("<enum>:"), for operators and tests that look into Redis.
func (s *Source) BoxLogKey(name string) string { return s.format.boxLogName(name) }

// logBoxes appends to their limits' box logs the box entries of pushes
// that were applied and raised the stored expiry to their own, so that
// the processes that follow those limits learn of them at their next
// cycle (ReadBoxLog). Each log lives as long as its latest entry, plus the
// expiry margin. A failure leaves those processes to learn of the entry
// when they count the id themselves: the entry itself is stored.
func (s *Source) logBoxes(ctx context.Context, now int64, pushes []syncpush.Rate) error {
	type log struct {
		entries []syncpush.Rate
		latest  int64
	}
	var logs map[string]*log
	for i := range pushes {
		p := &pushes[i]
		if !p.Applied || p.BoxExpires <= now || p.TotalBox != p.BoxExpires {
			continue
		}
		if logs == nil {
			logs = map[string]*log{}
		}
		name := s.format.boxLogName(nameOfKey(p.Box))
		l := logs[name]
		if l == nil {
			l = &log{}
			logs[name] = l
		}
		l.entries = append(l.entries, *p)
		l.latest = max(l.latest, p.BoxExpires)
	}
	if len(logs) == 0 {
		return nil
	}
	adds := map[string][]*goredis.StringCmd{}
	_, err := s.client.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for name, l := range logs {
			for _, p := range l.entries {
				adds[name] = append(adds[name], pipe.XAdd(ctx, &goredis.XAddArgs{
					Stream: name, MaxLen: boxLogLength, Approx: true,
					Values: []string{boxLogBox, p.Box, boxLogExpires, strconv.FormatInt(p.BoxExpires, 10)},
				}))
			}
		}
		return nil
	})
	// A log is given its lifetime only when it took its entries: a key
	// of another type at its name is not the source's to change.
	_, expireErr := s.client.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for name, l := range logs {
			if slices.ContainsFunc(adds[name], func(c *goredis.StringCmd) bool { return c.Err() != nil }) {
				continue
			}
			// A new log has no expiry, which PEXPIRE's GT takes for a
			// later one than any: NX sets it, GT lengthens it.
			ttl := (l.latest-now)/1e6 + 1 + s.wire.marginMS
			pipe.Do(ctx, "PEXPIRE", name, ttl, "NX")
			pipe.Do(ctx, "PEXPIRE", name, ttl, "GT")
		}
		return nil
	})
	if err = errors.Join(err, expireErr); err != nil {
		return fmt.Errorf("redis source: box log: %w", err)
	}
	return nil
}

// ReadBoxLog implements syncpush.BoxLog: at most limit entries of the box
// log of name after cursor ("" for the oldest it keeps), with XRANGE.
func (s *Source) ReadBoxLog(ctx context.Context, name, cursor string, limit int) ([]syncpush.BoxEntry, string, error) {
	start := "-"
	if cursor != "" {
		start = "(" + cursor
	}
	msgs, err := s.client.XRangeN(ctx, s.format.boxLogName(name), start, "+", int64(limit)).Result()
	if err != nil {
		return nil, cursor, fmt.Errorf("redis source: reading the box log of %s: %w", name, err)
	}
	entries := make([]syncpush.BoxEntry, 0, len(msgs))
	for _, m := range msgs {
		cursor = m.ID
		box, _ := m.Values[boxLogBox].(string)
		text, _ := m.Values[boxLogExpires].(string)
		expires, err := strconv.ParseInt(text, 10, 64)
		if err != nil || nameOfKey(box) != name {
			// Not an entry this source wrote: skipped, not trusted.
			continue
		}
		entries = append(entries, syncpush.BoxEntry{Box: box, Expires: expires})
	}
	return entries, cursor, nil
}

// nameOfKey is the limit name of a key "<enum>:<id>": up to its first
// colon, included ("" for a key without one).
func nameOfKey(key string) string {
	return key[:strings.IndexByte(key, ':')+1]
}
