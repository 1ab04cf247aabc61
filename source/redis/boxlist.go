package redis

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits"
)

// A box listing reads Redis with SCAN and HSCAN, which walk the keyspace
// a little at a time without blocking the server (KEYS would block it for
// the whole keyspace). These bound the work of one page: the names a step
// asks for, the steps of a page in format v1 (each over one master), and
// the group hashes of a page in format v2, asked for a batch per round
// trip. A page that reaches a bound ends with fewer entries and a cursor.
const (
	boxScanCount  = 1000
	boxScanSteps  = 8
	boxGroupSteps = 256
	boxGroupBatch = 64
)

// boxItem is one name a step found, and its value (the expiry, unix ns,
// in decimal; "" when it was gone before it was read).
type boxItem struct {
	name, value string
}

// boxStep is one SCAN or HSCAN call's names, sorted, and the cursor after
// it (0: the unit is done).
type boxStep struct {
	items []boxItem
	next  uint64
}

// boxScanner is one key format's walk: its units in order and the step
// of each.
type boxScanner interface {
	// first returns the unit a listing starts in, or ok false when there
	// is none.
	first(ctx context.Context) (unit string, ok bool, err error)
	// after returns the unit after unit, or ok false when unit was the last.
	after(ctx context.Context, unit string) (next string, ok bool, err error)
	// resume checks a cursor's unit, and returns the unit to go on in and
	// whether the cursor's scan position still applies to it.
	resume(ctx context.Context, unit string) (next string, keep, ok bool, err error)
	step(ctx context.Context, unit string, cursor uint64) (boxStep, error)
	// position places a cursor of unit's steps on the walk's way through
	// it, as a pair compared first by its first number (see scanPosition).
	position(ctx context.Context, unit string, cursor uint64) ([2]uint64, error)
	// entry reads a name as an id in the box, ok false for a name that is
	// not one of this box's entries.
	entry(name string) (id string, ok bool)
	// maxSteps bounds the steps of one page.
	maxSteps() int
}

// ListBox implements ratelimits.BoxLister with regular commands from Go:
// SCAN MATCH over each master (in format v1, one key per entry) or HSCAN
// MATCH over each group's hash (format v2). It never runs the script, so
// the script's protocol is untouched, and reads nothing the script
// writes but the box entries' names and values. Entries whose expiry is
// not after now (Redis keeps them a margin longer) are left out.
func (s *Source) ListBox(ctx context.Context, now int64, enum, cursor string, max int) (ratelimits.BoxPage, error) {
	cur, err := decodeBoxCursor(cursor)
	if err != nil {
		return ratelimits.BoxPage{}, err
	}
	var sc boxScanner
	if s.format.groups == 0 {
		sc = s.keyScanner(enum)
	} else {
		sc = s.groupScanner(enum)
	}
	return listBox(ctx, sc, cur, cursor == "", now, max)
}

// listBox walks sc from cur for one page.
func listBox(ctx context.Context, sc boxScanner, cur boxCursor, fresh bool, now int64, max int) (ratelimits.BoxPage, error) {
	var page ratelimits.BoxPage
	var ok bool
	var err error
	if fresh {
		cur = boxCursor{}
		if cur.Unit, ok, err = sc.first(ctx); err != nil || !ok {
			return page, err
		}
	} else {
		var keep bool
		if cur.Unit, keep, ok, err = sc.resume(ctx, cur.Unit); err != nil || !ok {
			return page, err
		}
		if !keep {
			cur.Scan, cur.After, cur.End = 0, "", 0
		}
	}
	for steps := 0; steps < sc.maxSteps() && len(page.Entries) < max; steps++ {
		st, err := sc.step(ctx, cur.Unit, cur.Scan)
		if err != nil {
			return ratelimits.BoxPage{}, err
		}
		items, next := st.items, st.next
		if cur.After != "" {
			i, found := slices.BinarySearchFunc(items, cur.After, func(it boxItem, name string) int { return strings.Compare(it.name, name) })
			if found {
				i++
			}
			items = items[i:]
			if next, err = earlierCursor(ctx, sc, cur.Unit, cur.End, next); err != nil {
				return ratelimits.BoxPage{}, err
			}
		}
		for i, it := range items {
			if len(page.Entries) == max {
				cur.After, cur.End = items[i-1].name, next
				page.Next = cur.encode()
				return page, nil
			}
			id, ok := sc.entry(it.name)
			exp, err := strconv.ParseInt(it.value, 10, 64)
			if ok && err == nil && exp > now {
				page.Entries = append(page.Entries, ratelimits.BoxEntry{ID: id, Expires: exp})
			}
		}
		cur.Scan, cur.After, cur.End = next, "", 0
		if cur.Scan == 0 {
			if cur.Unit, ok, err = sc.after(ctx, cur.Unit); err != nil {
				return ratelimits.BoxPage{}, err
			}
			if !ok {
				return page, nil // the listing is complete
			}
		}
	}
	page.Next = cur.encode()
	return page, nil
}

// earlierCursor returns whichever of two cursors of unit's walk comes
// first (0, the end of the unit, comes last). A page that ends inside a
// step leaves the next page to run that step again and take the names
// after the last one it took; but the step then ends where the keys
// present then make it end, which may be past where it ended before (keys
// were deleted in between) or short of it (keys were added, or the table
// grew). Past: names before the last one taken that lie beyond the first
// run's end were never taken; short: names after it that lie beyond the
// second run's end are not. Going on from the earlier end makes the next
// steps visit both stretches again: an entry present throughout is listed
// at least once, some twice.
func earlierCursor(ctx context.Context, sc boxScanner, unit string, a, b uint64) (uint64, error) {
	if a == 0 {
		return b, nil
	}
	if b == 0 {
		return a, nil
	}
	pa, err := sc.position(ctx, unit, a)
	if err != nil {
		return 0, err
	}
	pb, err := sc.position(ctx, unit, b)
	if err != nil {
		return 0, err
	}
	if before(pb, pa) {
		return b, nil
	}
	return a, nil
}

// before says whether position p comes before q on a walk.
func before(p, q [2]uint64) bool {
	return p[0] < q[0] || p[0] == q[0] && p[1] < q[1]
}

// scanPosition places a SCAN or HSCAN cursor on the way a walk goes: the
// index of the dictionary it is in (Redis 7.4 and later keep a cluster
// node's keys in one dictionary per slot, the index in the cursor's low
// dictBits bits; a hash and any other keyspace are one dictionary) and the
// cursor within that dictionary with its bits reversed. Redis increments
// a cursor in reverse bit order so that a walk survives the table growing
// or shrinking between steps, which also makes the reversed cursor a
// position that means the same whatever the table's size.
func scanPosition(cursor uint64, dictBits uint) [2]uint64 {
	return [2]uint64{cursor & (1<<dictBits - 1), bits.Reverse64(cursor >> dictBits)}
}

// sortItems sorts a step's names and drops repeats (SCAN may return a
// name twice while Redis resizes its table).
func sortItems(items []boxItem) []boxItem {
	slices.SortFunc(items, func(a, b boxItem) int { return strings.Compare(a.name, b.name) })
	return slices.CompactFunc(items, func(a, b boxItem) bool { return a.name == b.name })
}

// keyScanner walks format v1: box entries are keys
// "<prefix>{<id>}<enum>!", SCANned with MATCH on one Redis, or on each
// master of a cluster in the order of their addresses.
type keyScanner struct {
	s              *Source
	prefix, suffix string
	pattern        string
	// masters are the cluster's masters by address, read once per page.
	masters     map[string]*goredis.Client
	masterAddrs []string
	// dictBits are the cursor bits each master's slot index takes, read
	// when first needed.
	dictBits map[string]uint
}

func (s *Source) keyScanner(enum string) *keyScanner {
	prefix, suffix := s.format.prefix+"{", "}"+enum+"!"
	return &keyScanner{s: s, prefix: prefix, suffix: suffix, pattern: globEscape(prefix) + "*" + globEscape(suffix)}
}

func (k *keyScanner) maxSteps() int { return boxScanSteps }

// loadMasters reads the cluster's masters, once per page.
func (k *keyScanner) loadMasters(ctx context.Context) error {
	cc, ok := k.s.client.(*goredis.ClusterClient)
	if !ok || k.masters != nil {
		return nil
	}
	var mu sync.Mutex
	k.masters = map[string]*goredis.Client{}
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		k.masters[c.Options().Addr] = c
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis source: listing a box: the cluster's masters: %w", err)
	}
	for addr := range k.masters {
		k.masterAddrs = append(k.masterAddrs, addr)
	}
	slices.Sort(k.masterAddrs)
	return nil
}

func (k *keyScanner) first(ctx context.Context) (string, bool, error) {
	if !k.s.cluster {
		return "", true, nil
	}
	if err := k.loadMasters(ctx); err != nil || len(k.masterAddrs) == 0 {
		return "", false, err
	}
	return k.masterAddrs[0], true, nil
}

func (k *keyScanner) after(ctx context.Context, unit string) (string, bool, error) {
	if !k.s.cluster {
		return "", false, nil
	}
	if err := k.loadMasters(ctx); err != nil {
		return "", false, err
	}
	i, found := slices.BinarySearch(k.masterAddrs, unit)
	if found {
		i++
	}
	if i == len(k.masterAddrs) {
		return "", false, nil
	}
	return k.masterAddrs[i], true, nil
}

// resume goes on in the cursor's master when it still is one; a master
// that is gone (a failover) is replaced by the next address, from its
// start: a failover moves keys, so no cursor could be exact across it.
func (k *keyScanner) resume(ctx context.Context, unit string) (string, bool, bool, error) {
	if !k.s.cluster {
		if unit != "" {
			return "", false, false, ratelimits.ErrInvalidCursor
		}
		return "", true, true, nil
	}
	if err := k.loadMasters(ctx); err != nil {
		return "", false, false, err
	}
	if _, ok := k.masters[unit]; ok {
		return unit, true, true, nil
	}
	i, _ := slices.BinarySearch(k.masterAddrs, unit)
	if i == len(k.masterAddrs) {
		return "", false, false, nil
	}
	return k.masterAddrs[i], false, true, nil
}

func (k *keyScanner) node(unit string) goredis.Cmdable {
	if !k.s.cluster {
		return k.s.client
	}
	return k.masters[unit]
}

// step SCANs one stretch of a node and reads the values of the names it
// found in one round trip (on a cluster, every name a master's SCAN
// returns lives on it).
func (k *keyScanner) step(ctx context.Context, unit string, cursor uint64) (boxStep, error) {
	node := k.node(unit)
	names, next, err := node.Scan(ctx, cursor, k.pattern, boxScanCount).Result()
	if err != nil {
		return boxStep{}, fmt.Errorf("redis source: listing a box: SCAN: %w", err)
	}
	items := make([]boxItem, len(names))
	for i, n := range names {
		items[i].name = n
	}
	items = sortItems(items)
	if len(items) > 0 {
		cmds, err := node.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, it := range items {
				p.Get(ctx, it.name)
			}
			return nil
		})
		if err != nil && !errors.Is(err, goredis.Nil) {
			return boxStep{}, fmt.Errorf("redis source: listing a box: GET: %w", err)
		}
		for i, c := range cmds {
			items[i].value = c.(*goredis.StringCmd).Val() // "" when gone since
		}
	}
	return boxStep{items: items, next: next}, nil
}

// position reads the cursor as the server walks its keyspace: one
// dictionary, except on a cluster node of Redis 7.4 or later (Valkey 8 or
// later), which has one per slot (14 bits). The server is asked once per
// page, and only by a page that goes on inside a step.
func (k *keyScanner) position(ctx context.Context, unit string, cursor uint64) ([2]uint64, error) {
	if !k.s.cluster {
		return scanPosition(cursor, 0), nil
	}
	if k.dictBits == nil {
		k.dictBits = map[string]uint{}
	}
	b, ok := k.dictBits[unit]
	if !ok {
		info, err := k.node(unit).Info(ctx, "server").Result()
		if err != nil {
			return [2]uint64{}, fmt.Errorf("redis source: listing a box: INFO server: %w", err)
		}
		if slotDicts(info) {
			b = 14
		}
		k.dictBits[unit] = b
	}
	return scanPosition(cursor, b), nil
}

// slotDicts reads INFO server's answer: whether the server keeps a
// cluster node's keys in a dictionary per slot (Redis 7.4 and later;
// Valkey, which reports the Redis version it is compatible with as
// redis_version, from its own 8.0).
func slotDicts(info string) bool {
	field := func(name string) string {
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	atLeast := func(version string, major, minor int) bool {
		parts := strings.SplitN(version, ".", 3)
		if len(parts) < 2 {
			return false
		}
		ma, err1 := strconv.Atoi(parts[0])
		mi, err2 := strconv.Atoi(parts[1])
		return err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor)
	}
	if v := field("valkey_version"); v != "" {
		return atLeast(v, 8, 0)
	}
	return atLeast(field("redis_version"), 7, 4)
}

// entry reads a key "<prefix>{<id>}<enum>!": the enum has no '}', so the
// suffix is unique, and escapeID's '~' is taken off the id.
func (k *keyScanner) entry(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, k.prefix)
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, k.suffix)
	if !ok {
		return "", false
	}
	return strings.TrimPrefix(id, "~"), true
}

// groupScanner walks format v2: box entries are fields "!<enum>:<id>" of
// the hashes of groups 0 to groups−1, HSCANned with MATCH in group order;
// the hashes of a batch of groups are asked for in one round trip.
type groupScanner struct {
	s      *Source
	mark   string // "!<enum>:"
	groups uint64
	// fetched holds the first steps of the groups a batch asked for.
	fetched map[uint64]boxStep
}

func (s *Source) groupScanner(enum string) *groupScanner {
	return &groupScanner{s: s, mark: "!" + enum + ":", groups: s.format.groups, fetched: map[uint64]boxStep{}}
}

func (g *groupScanner) maxSteps() int { return boxGroupSteps }

func (g *groupScanner) first(context.Context) (string, bool, error) { return "0", true, nil }

func (g *groupScanner) after(_ context.Context, unit string) (string, bool, error) {
	n, _ := strconv.ParseUint(unit, 10, 64) // resume checked it
	if n+1 >= g.groups {
		return "", false, nil
	}
	return strconv.FormatUint(n+1, 10), true, nil
}

func (g *groupScanner) resume(_ context.Context, unit string) (string, bool, bool, error) {
	n, err := strconv.ParseUint(unit, 10, 64)
	if err != nil || n >= g.groups || unit != strconv.FormatUint(n, 10) {
		return "", false, false, ratelimits.ErrInvalidCursor
	}
	return unit, true, true, nil
}

func (g *groupScanner) hashKey(group uint64) string { return g.s.format.grouped(group, "", "") }

// step HSCANs one stretch of a group's hash. A group's first stretch is
// asked for with those of the next groups, boxGroupBatch at a time.
func (g *groupScanner) step(ctx context.Context, unit string, cursor uint64) (boxStep, error) {
	group, _ := strconv.ParseUint(unit, 10, 64)
	if cursor == 0 {
		if st, ok := g.fetched[group]; ok {
			return st, nil
		}
		end := min(group+boxGroupBatch, g.groups)
		cmds, err := g.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for n := group; n < end; n++ {
				p.HScan(ctx, g.hashKey(n), 0, globEscape(g.mark)+"*", boxScanCount)
			}
			return nil
		})
		if err != nil {
			return boxStep{}, fmt.Errorf("redis source: listing a box: HSCAN: %w", err)
		}
		for i, c := range cmds {
			kv, next := c.(*goredis.ScanCmd).Val()
			g.fetched[group+uint64(i)] = boxStep{items: pairs(kv), next: next}
		}
		return g.fetched[group], nil
	}
	kv, next, err := g.s.client.HScan(ctx, g.hashKey(group), cursor, globEscape(g.mark)+"*", boxScanCount).Result()
	if err != nil {
		return boxStep{}, fmt.Errorf("redis source: listing a box: HSCAN: %w", err)
	}
	return boxStep{items: pairs(kv), next: next}, nil
}

// position: a hash is one dictionary.
func (g *groupScanner) position(_ context.Context, _ string, cursor uint64) ([2]uint64, error) {
	return scanPosition(cursor, 0), nil
}

// pairs reads HSCAN's field, value list as sorted items.
func pairs(kv []string) []boxItem {
	items := make([]boxItem, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		items = append(items, boxItem{name: kv[i], value: kv[i+1]})
	}
	return sortItems(items)
}

func (g *groupScanner) entry(name string) (string, bool) {
	return strings.CutPrefix(name, g.mark)
}
