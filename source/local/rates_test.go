package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// SyncRates is what a shared source does with rate pushes, in memory:
// hits added second by second (ratecounter.Counter.Merge), an expiry kept
// as the later of the stored one and the pushed one, and both read back.
// fail and only work as for SyncWindows.
func (s *store) SyncRates(_ context.Context, now int64, pushes []syncpush.Rate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rn++
	s.ratePushes = append(s.ratePushes, slices.Clone(pushes))
	for i := range pushes {
		pushes[i].Applied = false
	}
	if s.fail != nil {
		return s.fail
	}
	for i := range pushes {
		p := &pushes[i]
		if s.only != nil && !s.only(p.Key+p.Box) {
			continue
		}
		if p.Key != "" {
			c := s.rates[p.Key]
			c.Merge(&p.Hits)
			s.rates[p.Key] = c
			p.Total = c
		}
		if p.Box != "" {
			e := max(s.boxes[p.Box], p.BoxExpires)
			if e <= now {
				delete(s.boxes, p.Box)
				e = 0
			} else {
				s.boxes[p.Box] = e
			}
			p.TotalBox = e
			if e > now && e == p.BoxExpires {
				name := nameOf(p.Box)
				s.boxLog[name] = append(s.boxLog[name], syncpush.BoxEntry{Box: p.Box, Expires: e})
			}
		}
		p.Applied = true
	}
	if s.only != nil {
		return errors.New("part of the sync failed")
	}
	return nil
}

// ReadBoxLog is the store's syncpush.BoxLog, whose cursors are indexes.
func (s *store) ReadBoxLog(_ context.Context, name, cursor string, limit int) ([]syncpush.BoxEntry, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, cursor, s.fail
	}
	from := 0
	if cursor != "" {
		var err error
		if from, err = strconv.Atoi(cursor); err != nil {
			return nil, cursor, err
		}
	}
	log := s.boxLog[name]
	to := min(from+limit, len(log))
	return slices.Clone(log[from:to]), strconv.Itoa(to), nil
}

// Call is the source's ERL call on the same counters and box entries.
func (s *store) Call(_ context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cn++
	if s.fail != nil {
		return s.fail
	}
	counters := make([]ratecounter.Counter, len(call.Counters))
	for i, cc := range call.Counters {
		counters[i] = s.rates[cc.Key]
	}
	newBox, write := bucket.ApplyCall(now, call, counters, s.boxes[call.Box], res)
	for i, cc := range call.Counters {
		s.rates[cc.Key] = counters[i]
	}
	if write {
		if newBox > now {
			s.boxes[call.Box] = newBox
		} else {
			delete(s.boxes, call.Box)
		}
	}
	return nil
}

// storedHits is what the store counts for key over the last w seconds.
func (s *store) storedHits(key string, now time.Time, w int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.rates[key]
	return c.Window(ratecounter.Second(now.UnixNano()), w)
}

// storedBox is the expiry the store holds for key (0 for none).
func (s *store) storedBox(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boxes[key]
}

func (s *store) rateCalls() (syncs, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rn, s.cn
}

// hundredIn10s is a rate-counter limit: 10 hits a second over 10 seconds,
// so the rate goes above it past 100 hits.
var hundredIn10s = ratecounter.Limit{Window: 10, Rate: 10}

// rop is a spend of cost on the rate counter key (its box entry has the
// same key), boxing until the start plus a minute, for a limit of
// sync_rate rate and the given capacity (0: the default).
func rop(key string, cost int64, rate time.Duration, capacity int) bucket.Op {
	return bucket.Op{Key: key, Algorithm: bucket.RateCounter, Rate: hundredIn10s, Cost: cost,
		Box: key, BoxUntil: start.Add(time.Minute).UnixNano(), Capacity: capacity, SyncRate: rate}
}

// penalized is op with a penalty box of its own key, boxing for penalty
// from the start.
func penalized(o bucket.Op, penalty time.Duration) bucket.Op {
	o.Box, o.BoxUntil, o.Capacity = o.Key, start.Add(penalty).UnixNano(), 0
	return o
}

// atRate gives c's counters and box the sync_rate rate.
func atRate(c *bucket.Call, rate time.Duration) *bucket.Call {
	for i := range c.Counters {
		c.Counters[i].SyncRate = rate
	}
	c.BoxSyncRate = rate
	return c
}

// call applies c in p at its clock's now: counters all of sync_rate rate,
// and the box too.
func (p *process) call(t *testing.T, c bucket.Call, rate time.Duration) bucket.CallResult {
	t.Helper()
	var res bucket.CallResult
	if err := p.Layer.call(context.Background(), p.clk.Now().UnixNano(), atRate(&c, rate), &res); err != nil {
		t.Fatalf("Call: %v", err)
	}
	return res
}

// hits reads key's counter in p: its hits over the last w seconds.
func (p *process) hits(t *testing.T, key string, rate time.Duration, w int64) int64 {
	t.Helper()
	res := p.call(t, bucket.Call{Counters: []bucket.CounterCheck{{Key: key}}}, rate)
	return res.Counters[0].Window(ratecounter.Second(p.clk.Now().UnixNano()), w)
}

// boxed reads key's box entry in p: when it leaves the box, 0 when it is
// not in it.
func (p *process) boxed(t *testing.T, key string, rate time.Duration) int64 {
	t.Helper()
	return p.call(t, bucket.Call{Box: key, Action: bucket.BoxRead}, rate).Expires
}

// boxAdd is penaltybox.add: key boxed until until, replacing its expiry.
func (p *process) boxAdd(t *testing.T, key string, until time.Time, rate time.Duration) {
	t.Helper()
	p.call(t, bucket.Call{Box: key, Action: bucket.BoxReplace, Until: until.UnixNano()}, rate)
}

// Below 0 a rate counter and its box live in the process: hits count, the
// box shuts an id out, another process sees nothing, and the store is
// never called.
func TestRateCounterBelowZeroStaysHere(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	o := rop("7:x", 60, -1, 0)
	if ok, out := a.spend(o); !ok || out[0].Remaining != 40 || out[0].Penalized {
		t.Fatalf("60 hits of 100: %v %+v", ok, out[0])
	}
	ok, out := a.spend(o)
	until := start.Add(time.Minute).UnixNano()
	if ok || !out[0].Penalized || out[0].RetryIn != until-clk.Now().UnixNano() {
		t.Fatalf("120 hits of 100: %v %+v, want boxed for a minute", ok, out[0])
	}
	if got := a.hits(t, "7:x", -1, 10); got != 120 {
		t.Fatalf("a counts %d hits, want 120: hits count although denied", got)
	}
	if got := a.boxed(t, "7:x", -1); got != until {
		t.Fatalf("a's box entry expires at %d, want %d", got, until)
	}
	if got, box := b.hits(t, "7:x", -1, 10), b.boxed(t, "7:x", -1); got != 0 || box != 0 {
		t.Fatalf("b sees %d hits and expiry %d, want nothing", got, box)
	}
	a.boxAdd(t, "7:y", start.Add(5*time.Minute), -1)
	a.call(t, bucket.Call{Box: "7:y", Action: bucket.BoxRemove}, -1)
	if res := a.sync(t); res != (syncResult{}) {
		t.Fatalf("sync of limits below 0 = %+v", res)
	}
	if syncs, calls := s.rateCalls(); syncs != 0 || calls != 0 || len(s.rates) != 0 || len(s.boxes) != 0 {
		t.Fatalf("the store was called (%d syncs, %d calls) or holds %v %v", syncs, calls, s.rates, s.boxes)
	}
}

// Above 0, two processes count apart, push their own hits at their syncs
// and read back the totals; an id boxed in one reaches the other at its
// next sync after the first one's.
func TestRateCounterSyncsAcrossProcesses(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	a.spend(rop("7:x", 30, time.Second, 0))
	b.spend(rop("7:x", 50, time.Second, 0))
	if res := a.sync(t); res != (syncResult{Pushed: 1, Fetched: 1}) {
		t.Fatalf("a's first sync = %+v", res)
	}
	b.sync(t)
	if got := a.hits(t, "7:x", time.Second, 10); got != 30 {
		t.Fatalf("a counts %d before reading b's hits, want 30", got)
	}
	a.sync(t)
	for name, p := range map[string]*process{"a": a, "b": b} {
		if got := p.hits(t, "7:x", time.Second, 10); got != 80 {
			t.Fatalf("%s counts %d after the syncs, want 80", name, got)
		}
	}
	if got := s.storedHits("7:x", clk.Now(), 10); got != 80 {
		t.Fatalf("the store counts %d, want 80: each hit once", got)
	}
	// a goes above the limit on the totals it read: it boxes the id.
	if ok, out := a.spend(rop("7:x", 30, time.Second, 0)); ok || !out[0].Penalized {
		t.Fatalf("110 hits of 100 in a: %v %+v", ok, out[0])
	}
	until := start.Add(time.Minute).UnixNano()
	if got := b.boxed(t, "7:x", time.Second); got != 0 {
		t.Fatalf("b sees expiry %d before any sync", got)
	}
	a.sync(t)
	if s.storedBox("7:x") != until {
		t.Fatalf("the store holds expiry %d after a's sync", s.storedBox("7:x"))
	}
	b.sync(t)
	if got, hits := b.boxed(t, "7:x", time.Second), b.hits(t, "7:x", time.Second, 10); got != until || hits != 110 {
		t.Fatalf("b after its sync: expiry %d, %d hits; want %d and 110", got, hits, until)
	}
}

// Driven by the loops: an id boxed in one process is boxed in the other
// within two sync intervals.
func TestBoxReachesOthersWithinTwoSyncs(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{Timers: clk}), newProcess(t, s, clk, Options{Timers: clk})
	rearmed := map[*process]chan time.Duration{a: make(chan time.Duration, 16), b: make(chan time.Duration, 16)}
	for p, c := range rearmed {
		p.rearmed = func(rate time.Duration) { c <- rate }
	}
	until := start.Add(10 * time.Minute)
	if got := b.boxed(t, "9:id", time.Second); got != 0 { // b holds the entry from now on
		t.Fatalf("b sees expiry %d before anything", got)
	}
	a.boxAdd(t, "9:id", until, time.Second)
	for tick := range 2 {
		clk.Add(time.Second)
		receive(t, rearmed[a])
		receive(t, rearmed[b])
		if tick == 0 && s.storedBox("9:id") != until.UnixNano() {
			t.Fatal("a's loop did not push the entry at its first cycle")
		}
	}
	if got := b.boxed(t, "9:id", time.Second); got != until.UnixNano() {
		t.Fatalf("b sees expiry %d after two sync intervals, want %d", got, until.UnixNano())
	}
}

// An id boxed in one process is boxed in another at its next sync, also
// when that one never counted the id: it reads the box log of each limit
// it follows (its configuration's), whether it counts other ids of it or
// none.
func TestBoxReachesProcessesThatNeverCountedTheID(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b, c := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	for _, p := range []*process{b, c} {
		p.Follow([]Followed{{Name: "9:", SyncRate: time.Second}, {Name: "8:", SyncRate: -1}})
	}
	c.spend(rop("9:other", 1, time.Second, 0))
	until := start.Add(10 * time.Minute)
	a.boxAdd(t, "9:id", until, time.Second)
	b.sync(t) // before a pushes: nothing to read yet
	c.sync(t)
	a.sync(t)
	if res := b.sync(t); res != (syncResult{Fetched: 1}) {
		t.Fatalf("b's sync after a's = %+v, want the one entry fetched", res)
	}
	c.sync(t)
	for name, p := range map[string]*process{"b (counts nothing of the limit)": b, "c (counts another id)": c} {
		if got := p.boxed(t, "9:id", time.Second); got != until.UnixNano() {
			t.Errorf("%s sees expiry %d, want %d", name, got, until.UnixNano())
		}
	}
	// The entry read is kept fresh like any other: a later expiry reaches
	// b, and another read of the log takes nothing twice.
	later := until.Add(time.Minute)
	a.boxAdd(t, "9:id", later, time.Second)
	a.sync(t)
	b.sync(t)
	if got := b.boxed(t, "9:id", time.Second); got != later.UnixNano() {
		t.Errorf("b sees expiry %d after a lengthened it, want %d", got, later.UnixNano())
	}
	if res := b.sync(t); res.Fetched != 1 {
		t.Errorf("b's quiet sync fetched %d, want its one entry's read", res.Fetched)
	}
	// An entry that no longer boxes when read is not taken.
	clk.Add(11 * time.Minute)
	d := newProcess(t, s, clk, Options{})
	d.Follow([]Followed{{Name: "9:", SyncRate: time.Second}})
	if res := d.sync(t); res.Fetched != 0 {
		t.Errorf("a new process read %d live entries from a log of expired ones", res.Fetched)
	}
}

// A box log that cannot be read fails no push: the hits are pushed and
// counted as such, the failure is reported apart, and Close does not wait
// on it.
func TestBoxLogFailureFailsNoPush(t *testing.T) {
	s, clk := newStore(), fakeClock()
	var cycles []Cycle
	p := newProcess(t, nil, clk, Options{Syncer: unreadableLog{s}, OnCycle: func(c Cycle) { cycles = append(cycles, c) }})
	p.Follow([]Followed{{Name: "6:", SyncRate: 5 * time.Second}})
	p.spend(rop("6:u", 5, 5*time.Second, 0))
	pushed, _, err := p.Sync(context.Background())
	if err != nil || pushed != 1 || s.storedHits("6:u", clk.Now(), 10) != 5 {
		t.Fatalf("Sync = %d pushed, %v; store %d hits; want 1 pushed, no error, 5 hits", pushed, err, s.storedHits("6:u", clk.Now(), 10))
	}
	if len(cycles) != 1 || cycles[0].Err != nil || cycles[0].BoxLogErr == nil {
		t.Fatalf("cycles %+v, want one with the box log's failure apart", cycles)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// unreadableLog is a store whose box logs cannot be read.
type unreadableLog struct{ *store }

func (unreadableLog) ReadBoxLog(context.Context, string, string, int) ([]syncpush.BoxEntry, string, error) {
	return nil, "", errors.New("NOPERM this user has no permissions to run the 'xrange' command")
}

// A denied batch writes its rate-counter hits and its box entries, as
// bucket.SpendBatch says: in Spend, and in Commit after Decide.
func TestDeniedBatchStillCountsHits(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	full := op("3:w", 1, 1, -1)
	p.admit(1, full)
	if ok, out := p.spend(full, rop("7:x", 5, -1, 0)); ok || !out[1].Allowed {
		t.Fatalf("batch with a full window: %v %+v", ok, out)
	}
	if got := p.hits(t, "7:x", -1, 10); got != 5 {
		t.Fatalf("%d hits counted in the denied batch, want 5", got)
	}
	// Decide writes nothing; Commit of its outcomes writes the hits and
	// the boxing, not a window's cost.
	ops := []bucket.Op{full, rop("7:x", 100, -1, 0), penalized(op("3:v", 10, 1, -1), time.Hour)}
	out := make([]bucket.Outcome, len(ops))
	if p.decide(clk.Now().UnixNano(), ops, out) {
		t.Fatal("Decide allowed a batch with a full window")
	}
	if got := p.hits(t, "7:x", -1, 10); got != 5 {
		t.Fatalf("Decide wrote hits: %d", got)
	}
	p.commit(clk.Now().UnixNano(), ops, out)
	if got, box := p.hits(t, "7:x", -1, 10), p.boxed(t, "7:x", -1); got != 105 || box != start.Add(time.Minute).UnixNano() {
		t.Fatalf("after Commit: %d hits, box until %d; want 105 and a minute", got, box)
	}
	if got := p.remaining(t, op("3:v", 10, 1, -1)); got != 10 {
		t.Fatalf("the window of the denied batch has %d left, want 10 (nothing written)", got)
	}
	// A window limit with a penalty, denied by its own window, boxes its id.
	pen := penalized(op("3:w", 1, 1, -1), time.Hour)
	if ok, out := p.spend(pen); ok || !out[0].Penalized || !out[0].WriteBox {
		t.Fatalf("a full window with a penalty: %v %+v", ok, out[0])
	}
	clk.Add(2 * time.Hour) // the window is empty again; the box entry has expired
	if ok, _ := p.spend(pen); !ok {
		t.Fatal("denied once the window and the box are both over")
	}
}

// A limit's capacity bounds each of its counters and its box in this
// process: a new counter evicts the least recently incremented one, a new
// box entry the one with the smallest remaining time, and entries that
// count or box nothing any more are forgotten first.
func TestRateCapacity(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	for _, k := range []string{"7:a", "7:b", "7:c"} {
		p.spend(rop(k, 1, -1, 3))
	}
	p.spend(rop("8:other", 1, -1, 3)) // another limit: another bound
	clk.Add(time.Second)
	p.spend(rop("7:a", 1, -1, 3)) // a is now the most recently incremented
	p.spend(rop("7:d", 1, -1, 3))
	want := map[string]int64{"7:a": 2, "7:b": 0, "7:c": 1, "7:d": 1}
	for k, n := range want {
		if got := p.hits(t, k, -1, 10); got != n {
			t.Fatalf("%s counts %d, want %d", k, got, n)
		}
	}
	if n := p.Counters(); n != 4 {
		t.Fatalf("%d counters held, want 4", n)
	}
	if ev, lost := p.Evictions(); ev != 1 || lost != 1 {
		t.Fatalf("evictions %d, lost %d; want 1 and 1", ev, lost)
	}
	add := func(k string, in time.Duration) {
		p.call(t, bucket.Call{Box: k, Action: bucket.BoxReplace, Until: clk.Now().Add(in).UnixNano(), BoxCapacity: 2}, -1)
	}
	add("7:a", 5*time.Minute)
	add("7:b", 2*time.Minute)
	add("7:c", 3*time.Minute) // b expires first: evicted
	for k, in := range map[string]bool{"7:a": true, "7:b": false, "7:c": true} {
		if got := p.boxed(t, k, -1) > 0; got != in {
			t.Fatalf("%s in the box: %v, want %v", k, got, in)
		}
	}
	// A minute on, every counter counts nothing, and after four minutes
	// c's box entry is over: the next inserts forget them.
	clk.Add(4 * time.Minute)
	p.spend(rop("7:e", 1, -1, 3))
	add("7:e", 5*time.Minute)
	if n, boxes := p.Counters(), p.Boxes(); n != 2 || boxes != 2 {
		t.Fatalf("%d counters and %d box entries held, want 2 (8:other, 7:e) and 2 (7:a, 7:e)", n, boxes)
	}
	if ev, _ := p.Evictions(); ev != 2 {
		t.Fatalf("evictions %d, want 2: forgetting is not evicting", ev)
	}
}

// Above 0, a counter evicted with unpushed hits leaves them to the next
// cycle, which pushes them.
func TestEvictedRateHitsArePushed(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	p.spend(rop("7:a", 5, time.Second, 1))
	p.spend(rop("7:b", 7, time.Second, 1)) // evicts a
	if n := p.Pending(); n != 2 {
		t.Fatalf("Pending = %d, want 2 (b, and a's orphan)", n)
	}
	p.sync(t)
	if a, b := s.storedHits("7:a", clk.Now(), 10), s.storedHits("7:b", clk.Now(), 10); a != 5 || b != 7 {
		t.Fatalf("the store counts a %d, b %d; want 5 and 7", a, b)
	}
	if _, lost := p.Evictions(); lost != 0 {
		t.Fatalf("%d counters lost hits", lost)
	}
}

// One ERL call is one atomic step: concurrent check_rates on one entry
// each see a count of their own, and exactly those past the limit box it.
func TestCallIsAtomic(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	const workers, each = 8, 50
	until := start.Add(2 * time.Minute).UnixNano()
	var mu sync.Mutex
	seen := map[int64]bucket.CallResult{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				c := bucket.Call{
					Counters: []bucket.CounterCheck{{Key: "7:x", Delta: 1, Limit: ratecounter.Limit{Window: 60, Rate: 5}}},
					Box:      "7:x", Action: bucket.BoxWhenAbove, Until: until,
				}
				var res bucket.CallResult
				if err := p.Layer.call(context.Background(), clk.Now().UnixNano(), atRate(&c, time.Second), &res); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[res.Counters[0].Window(ratecounter.Second(clk.Now().UnixNano()), 60)] = res
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			if _, _, err := p.Sync(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	for n := int64(1); n <= workers*each; n++ {
		res, ok := seen[n]
		if !ok {
			t.Fatalf("no call saw %d hits: two calls saw the same count", n)
		}
		if above := n > 300; res.Above[0] != above || (res.Expires == until) != above {
			t.Fatalf("the call that saw %d hits: above %v, expires %d", n, res.Above[0], res.Expires)
		}
	}
	p.sync(t)
	if got := s.storedHits("7:x", clk.Now(), 60); got != workers*each {
		t.Fatalf("the store counts %d, want %d", got, workers*each)
	}
}

// A failed push keeps its hits and expiries; decisions go on counting
// them, and the next cycle pushes them once. A sync failing in part
// pushes again only what got no answer.
func TestFailedRatePushIsKeptAndRetried(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	p.spend(rop("7:a", 30, time.Second, 0))
	p.spend(rop("7:b", 40, time.Second, 0))
	p.boxAdd(t, "9:z", start.Add(5*time.Minute), time.Second)
	down := errors.New("down")
	s.setFail(down)
	if _, _, err := p.Sync(context.Background()); !errors.Is(err, down) {
		t.Fatalf("Sync with the store down: %v", err)
	}
	if n := p.Pending(); n != 3 {
		t.Fatalf("Pending after the failure = %d, want 3", n)
	}
	if got := p.hits(t, "7:a", time.Second, 10); got != 30 {
		t.Fatalf("a counts %d after the failed push, want 30", got)
	}
	s.mu.Lock()
	s.fail, s.only = nil, func(k string) bool { return k == "7:a7:a" }
	s.mu.Unlock()
	if _, _, err := p.Sync(context.Background()); err == nil {
		t.Fatal("a sync failing in part reported no error")
	}
	s.mu.Lock()
	s.only = nil
	s.mu.Unlock()
	p.spend(rop("7:a", 1, time.Second, 0))
	p.sync(t)
	if a, b := s.storedHits("7:a", clk.Now(), 10), s.storedHits("7:b", clk.Now(), 10); a != 31 || b != 40 {
		t.Fatalf("the store counts a %d, b %d; want 31 and 40: each hit once", a, b)
	}
	if s.storedBox("9:z") != start.Add(5*time.Minute).UnixNano() || p.Pending() != 0 {
		t.Fatalf("after the retry: stored box %d, pending %d", s.storedBox("9:z"), p.Pending())
	}
}

// Close pushes the rate hits and box entries not pushed yet.
func TestClosePushesRateHits(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{ShutdownRetry: -1})
	p.spend(rop("7:a", 120, time.Hour, 0)) // above: boxed too
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.storedHits("7:a", clk.Now(), 10) != 120 || s.storedBox("7:a") != start.Add(time.Minute).UnixNano() {
		t.Fatalf("after Close the store holds %d hits and expiry %d", s.storedHits("7:a", clk.Now(), 10), s.storedBox("7:a"))
	}
}

// A removal cannot be pushed (a sync only lengthens an entry): it is
// applied on the source at once, and a later read-back does not undo it.
// An add that shortens an entry likewise; one that lengthens it waits for
// the next sync.
func TestBoxRemovalAndShorteningReachTheSource(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	long := start.Add(30 * time.Minute)
	b.boxed(t, "9:id", time.Second)
	a.boxAdd(t, "9:id", long, time.Second)
	if _, calls := s.rateCalls(); calls != 0 {
		t.Fatal("a lengthening add was applied on the source at once")
	}
	a.sync(t)
	b.sync(t)
	if got := b.boxed(t, "9:id", time.Second); got != long.UnixNano() {
		t.Fatalf("b sees %d", got)
	}
	short := start.Add(5 * time.Minute)
	b.boxAdd(t, "9:id", short, time.Second)
	if _, calls := s.rateCalls(); calls != 1 || s.storedBox("9:id") != short.UnixNano() {
		t.Fatalf("a shortening add: %d source calls, stored %d", calls, s.storedBox("9:id"))
	}
	a.sync(t)
	if got := a.boxed(t, "9:id", time.Second); got != short.UnixNano() {
		t.Fatalf("a sees %d after its sync, want the shortened %d", got, short.UnixNano())
	}
	if res := b.call(t, bucket.Call{Box: "9:id", Action: bucket.BoxRemove}, time.Second); !res.Removed || res.Expires != 0 {
		t.Fatalf("removal in b: %+v", res)
	}
	if s.storedBox("9:id") != 0 || b.boxed(t, "9:id", time.Second) != 0 {
		t.Fatal("the removal did not reach the store, or b still boxes")
	}
	for range 2 {
		a.sync(t)
		b.sync(t)
	}
	if ga, gb := a.boxed(t, "9:id", time.Second), b.boxed(t, "9:id", time.Second); ga != 0 || gb != 0 {
		t.Fatalf("after the removal and syncs a sees %d, b %d; want 0", ga, gb)
	}
	// A process that never saw the entry still removes it from the source.
	a.boxAdd(t, "9:other", long, time.Second)
	a.sync(t)
	c := newProcess(t, s, clk, Options{})
	if res := c.call(t, bucket.Call{Box: "9:other", Action: bucket.BoxRemove}, time.Second); !res.Removed {
		t.Fatalf("removal of an entry only the source held: %+v", res)
	}
	// The source down: the removal fails, and nothing changes here.
	a.boxAdd(t, "9:third", long, time.Second)
	down := errors.New("down")
	s.setFail(down)
	removal := &bucket.Call{Box: "9:third", Action: bucket.BoxRemove, BoxSyncRate: time.Second}
	if err := a.Layer.call(context.Background(), clk.Now().UnixNano(), removal, &bucket.CallResult{}); !errors.Is(err, down) {
		t.Fatalf("a removal with the source down: %v, want the source's error", err)
	}
	if got := a.boxed(t, "9:third", time.Second); got != long.UnixNano() {
		t.Fatalf("a failed removal changed the entry here: %d", got)
	}
	s.setFail(nil)
}

// A refund gives back the hits not pushed first, then pushed ones on the
// source, where the totals read here come down by as much at once.
func TestRateRefundGivesBackUnpushedHitsFirst(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	p.spend(rop("7:a", 5, time.Second, 0))
	p.sync(t)
	p.spend(rop("7:a", 3, time.Second, 0))
	out, err := p.refundOn(s, rop("7:a", 5, time.Second, 0))
	if err != nil || !out[0].Allowed || out[0].Remaining != 97 {
		t.Fatalf("refund: %+v, %v; want 3 given back here and 2 on the source, 97 remaining", out[0], err)
	}
	if got, stored := p.hits(t, "7:a", time.Second, 10), s.storedHits("7:a", clk.Now(), 10); got != 3 || stored != 3 {
		t.Fatalf("%d hits here and %d stored after the refund, want 3 and 3", got, stored)
	}
	if out, err = p.refundOn(s, rop("7:a", 5, time.Second, 0)); err != nil || !out[0].Allowed || out[0].Remaining != 100 {
		t.Fatalf("refund of the pushed hits: %+v, %v; want 100 remaining", out[0], err)
	}
	if out, err = p.refundOn(s, rop("7:a", 5, time.Second, 0)); err != nil || out[0].Allowed {
		t.Fatalf("a refund of nothing gave something back: %+v, %v", out[0], err)
	}
	p.sync(t)
	if got, stored := p.hits(t, "7:a", time.Second, 10), s.storedHits("7:a", clk.Now(), 10); got != 0 || stored != 0 {
		t.Fatalf("%d hits here and %d stored after a sync, want 0", got, stored)
	}
}

// Reset forgets a rate counter and its box entry here, with the source's
// part reset in the same call, and nothing comes back at the next sync.
func TestRateReset(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	synced, here := rop("7:a", 120, time.Second, 0), rop("7:b", 120, -1, 0)
	p.spend(synced)
	p.spend(here)
	n, err := p.reset(context.Background(), clk.Now().UnixNano(), []bucket.Op{synced, here}, func(context.Context) (int, error) {
		return 0, nil
	})
	if err != nil || n != 2 {
		t.Fatalf("Reset = %d, %v; want 2: neither was on the source", n, err)
	}
	for _, o := range []bucket.Op{synced, here} {
		if got, box := p.hits(t, o.Key, o.SyncRate, 10), p.boxed(t, o.Key, o.SyncRate); got != 0 || box != 0 {
			t.Fatalf("%s after the reset: %d hits, box %d", o.Key, got, box)
		}
	}
	if res := p.sync(t); res.Pushed != 0 {
		t.Fatalf("sync after the reset pushed %d", res.Pushed)
	}
}

// A window limit with a penalty above 0 syncs its box entry alone: a
// push with no counter key.
func TestWindowPenaltyBoxSyncs(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	w := penalized(op("3:w", 1, 1, time.Second), time.Hour)
	b.spend(func() bucket.Op { o := w; o.Cost = 0; return o }())
	a.admit(2, w) // the second is denied: boxed
	before := len(s.ratePushes)
	a.sync(t)
	// The cycle's push (a read of the box log's entry follows it).
	pushed := s.ratePushes[before]
	if len(pushed) != 1 || pushed[0].Key != "" || pushed[0].Box != "3:w" || pushed[0].BoxExpires != start.Add(time.Hour).UnixNano() {
		t.Fatalf("a's rate push: %+v", pushed)
	}
	b.sync(t)
	o := w
	o.Cost = 0
	if ok, out := b.spend(o); ok || !out[0].Penalized {
		t.Fatalf("b after the syncs: %v %+v", ok, out[0])
	}
}

// Without a rate syncer, limits above 0 count here, and their cycles fail
// only when they have something to push.
func TestNoRateSyncer(t *testing.T) {
	clk := fakeClock()
	p := newProcess(t, nil, clk, Options{Syncer: windowsOnly{newStore()}})
	if res := p.sync(t); res != (syncResult{}) {
		t.Fatalf("sync with nothing = %+v", res)
	}
	p.boxed(t, "9:a", time.Second) // a read: nothing to push
	if _, _, err := p.Sync(context.Background()); err != nil {
		t.Fatalf("sync of a read-only entry: %v", err)
	}
	p.spend(rop("7:a", 5, time.Second, 0))
	if _, _, err := p.Sync(context.Background()); !errors.Is(err, ErrNoRateSyncer) {
		t.Fatalf("sync with hits: %v, want ErrNoRateSyncer", err)
	}
	if got := p.hits(t, "7:a", time.Second, 10); got != 5 {
		t.Fatalf("%d hits kept, want 5", got)
	}
	p.boxAdd(t, "9:a", start.Add(5*time.Minute), time.Second)
	if res := p.call(t, bucket.Call{Box: "9:a", Action: bucket.BoxRemove}, time.Second); !res.Removed {
		t.Fatalf("a removal here: %+v", res)
	}
	// Nothing left to push, so that Close does not wait for a sync that
	// cannot happen.
	if err := p.refund(context.Background(), clk.Now().UnixNano(), []bucket.Op{rop("7:a", 5, time.Second, 0)}, make([]bucket.Outcome, 1), nil); err != nil {
		t.Fatal(err)
	}
	if n := p.Pending(); n != 0 {
		t.Fatalf("Pending = %d after the refund", n)
	}
}

// windowsOnly is a source that syncs window counters and nothing else.
type windowsOnly struct{ s *store }

func (w windowsOnly) SyncWindows(ctx context.Context, now int64, pushes []syncpush.Window) error {
	return w.s.SyncWindows(ctx, now, pushes)
}

// A cycle of a large table goes in several calls, each pushing its part.
func TestLargeTableSyncsInParts(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	n := rateChunk + 10
	for i := range n {
		p.spend(rop(fmt.Sprintf("7:%d", i), 1, time.Second, n))
	}
	if res := p.sync(t); res.Pushed != n || res.Fetched != n {
		t.Fatalf("sync = %+v, want %d pushed and fetched", res, n)
	}
	if syncs, _ := s.rateCalls(); syncs != 2 || len(s.rates) != n {
		t.Fatalf("%d calls storing %d counters, want 2 and %d", syncs, len(s.rates), n)
	}
}

// Above 0, a counter or box entry in use here is kept while it counts or
// boxes nothing, so that the cycles go on reading what the others do; one
// not looked up for a minute is forgotten by the next cycle.
func TestUnusedEntriesAreForgotten(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	b.boxed(t, "9:id", time.Second)
	b.hits(t, "7:x", time.Second, 10)
	for range 3 {
		clk.Add(10 * time.Second)
		b.sync(t)
	}
	if n, boxes := b.Counters(), b.Boxes(); n != 1 || boxes != 1 {
		t.Fatalf("b holds %d counters and %d box entries, want 1 and 1", n, boxes)
	}
	a.boxAdd(t, "9:id", clk.Now().Add(10*time.Minute), time.Second)
	a.spend(rop("7:x", 4, time.Second, 0))
	a.sync(t)
	b.sync(t)
	if got, hits := b.boxed(t, "9:id", time.Second), b.hits(t, "7:x", time.Second, 10); got == 0 || hits != 4 {
		t.Fatalf("b, half a minute after it last looked: expiry %d, %d hits", got, hits)
	}
	clk.Add(11 * time.Minute) // the box entry is over, the hits too
	b.sync(t)
	if n, boxes := b.Counters(), b.Boxes(); n != 0 || boxes != 0 {
		t.Fatalf("b holds %d counters and %d box entries unused for 11 minutes, want none", n, boxes)
	}
}

// A rate-counter spend on a counter already held allocates nothing, here
// and above 0.
func TestLocalRateSpendAllocatesNothing(t *testing.T) {
	p := newProcess(t, newStore(), fakeClock(), Options{})
	for _, rate := range []time.Duration{-1, time.Second} {
		ops := []bucket.Op{rop("7:k", 0, rate, 0)}
		ops[0].Mode = bucket.SpendOnly
		ops[0].Cost = 1
		out := make([]bucket.Outcome, 1)
		now := p.clk.Now().UnixNano()
		p.Layer.spend(now, ops, out)
		if n := testing.AllocsPerRun(100, func() { p.Layer.spend(now, ops, out) }); n != 0 {
			t.Fatalf("a rate-counter spend of sync_rate %s allocates %v times, want 0", rate, n)
		}
	}
}

// syncsOnly syncs windows and rate counters but has no ERL call.
type syncsOnly struct{ s *store }

func (w syncsOnly) SyncWindows(ctx context.Context, now int64, pushes []syncpush.Window) error {
	return w.s.SyncWindows(ctx, now, pushes)
}

func (w syncsOnly) SyncRates(ctx context.Context, now int64, pushes []syncpush.Rate) error {
	return w.s.SyncRates(ctx, now, pushes)
}

// A source that syncs boxes but cannot remove an entry refuses a removal
// above 0 rather than removing it here only, where the next read-back
// would bring it back.
func TestRemovalWithoutSourceCall(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, nil, clk, Options{Syncer: syncsOnly{s}})
	p.boxAdd(t, "9:a", start.Add(5*time.Minute), time.Second)
	removal := &bucket.Call{Box: "9:a", Action: bucket.BoxRemove, BoxSyncRate: time.Second}
	if err := p.Layer.call(context.Background(), clk.Now().UnixNano(), removal, &bucket.CallResult{}); !errors.Is(err, ErrNoBoxCall) {
		t.Fatalf("removal: %v, want ErrNoBoxCall", err)
	}
	if p.boxed(t, "9:a", time.Second) == 0 {
		t.Fatal("the refused removal took the entry out here")
	}
}
