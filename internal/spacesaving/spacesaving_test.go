package spacesaving

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// check holds a summary to the Space-Saving bounds against the true
// counts: Count never under, Count − Error never over, and every item
// seen more than Total/k times listed.
func check(t *testing.T, s Summary, truth map[string]uint64, k int) {
	t.Helper()
	listed := map[string]bool{}
	var sum uint64
	for _, c := range s.Counters {
		listed[c.ID] = true
		sum += c.Count
		if c.Count < truth[c.ID] {
			t.Errorf("%s: count %d under the true %d", c.ID, c.Count, truth[c.ID])
		}
		if c.Count-c.Error > truth[c.ID] {
			t.Errorf("%s: count %d - error %d over the true %d", c.ID, c.Count, c.Error, truth[c.ID])
		}
	}
	for id, n := range truth {
		if !listed[id] && n > s.Floor {
			t.Errorf("%s: seen %d times, not listed, above the floor %d", id, n, s.Floor)
		}
		if n*uint64(k) > s.Total && !listed[id] {
			t.Errorf("%s: seen %d of %d times, not listed", id, n, s.Total)
		}
	}
	if k > 0 && sum != s.Total {
		t.Errorf("counters add up to %d, want the total %d", sum, s.Total)
	}
}

func TestSketch(t *testing.T) {
	tests := []struct {
		name   string
		k      int
		stream string // one letter an item
		want   []Counter
	}{
		{"empty", 3, "", nil},
		{"under capacity, exact", 3, "abacab", []Counter{{"a", 3, 0}, {"b", 2, 0}, {"c", 1, 0}}},
		{"the least counted gives its counter up", 2, "aabc", []Counter{{"a", 2, 0}, {"c", 2, 1}}},
		{"a heavy item survives a flood", 3, "aaaabcdefg", []Counter{{"a", 4, 0}, {"f", 3, 2}, {"g", 3, 2}}},
		{"one counter", 1, "abab", []Counter{{"b", 4, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.k)
			truth := map[string]uint64{}
			for _, r := range tt.stream {
				s.Add(string(r))
				truth[string(r)]++
			}
			got := s.Summary()
			if fmt.Sprint(got.Counters) != fmt.Sprint(tt.want) && !(len(got.Counters) == 0 && tt.want == nil) {
				t.Errorf("counters %v, want %v", got.Counters, tt.want)
			}
			check(t, got, truth, tt.k)
			if s.Len() > tt.k {
				t.Errorf("%d items tracked, cap %d", s.Len(), tt.k)
			}
		})
	}
}

// A long skewed stream keeps every bound, whatever the seed.
func TestSketchBoundsRandom(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		k := 8 + int(seed)
		s := New(k)
		truth := map[string]uint64{}
		for range 5000 {
			id := fmt.Sprint(int(r.ExpFloat64() * 10))
			s.Add(id)
			truth[id]++
		}
		check(t, s.Summary(), truth, k)
	}
}

func TestReset(t *testing.T) {
	s := New(2)
	for _, id := range []string{"a", "b", "c"} {
		s.Add(id)
	}
	s.Reset()
	if s.Len() != 0 || s.Total() != 0 || s.Floor() != 0 || len(s.Summary().Counters) != 0 {
		t.Fatalf("after Reset: len %d total %d floor %d", s.Len(), s.Total(), s.Floor())
	}
	s.Add("d")
	if got := s.Summary().Counters; len(got) != 1 || got[0] != (Counter{"d", 1, 0}) {
		t.Fatalf("after Reset and Add: %v", got)
	}
}

// The id is copied when it takes a counter: a caller reusing its bytes
// does not change what the sketch holds.
func TestAddCopiesID(t *testing.T) {
	s := New(4)
	b := []byte("alice")
	s.Add(string(b)) // the conversion is the caller's; Add must not keep a view of b
	unsafeView := strings.Clone("bob")
	s.Add(unsafeView)
	copy(b, "mallo")
	if got := s.Summary().Counters; got[0].ID != "alice" && got[1].ID != "alice" {
		t.Fatalf("counters %v lost alice", got)
	}
}

// Counting an item already tracked allocates nothing.
func TestAddTrackedAllocatesNothing(t *testing.T) {
	s := New(128)
	ids := make([]string, 128)
	for i := range ids {
		ids[i] = fmt.Sprint("id-", i)
		s.Add(ids[i])
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() { s.Add(ids[i%len(ids)]); i++ }); n != 0 {
		t.Fatalf("%v allocations per Add of a tracked id, want 0", n)
	}
}

// Memory stays at k counters whatever the number of distinct items.
func TestSketchBounded(t *testing.T) {
	s := New(128)
	buf := make([]byte, 0, 16)
	for i := range 200_000 {
		buf = fmt.Appendf(buf[:0], "%d", i)
		s.Add(string(buf))
	}
	indexed := 0
	for _, n := range s.index {
		if n != 0 {
			indexed++
		}
	}
	if s.Len() != 128 || indexed != 128 || len(s.index) != 256 || cap(s.items) > 256 || cap(s.heap) > 256 {
		t.Fatalf("%d items, %d indexed in %d slots, heap cap %d after 200,000 distinct ids; want 128", s.Len(), indexed, len(s.index), cap(s.heap))
	}
}

// Once the counters' buffers are as long as the ids, an id that takes a
// counter allocates nothing either: the half-denied case of many distinct
// ids, each replacing the least counted.
func TestAddUntrackedAllocatesNothing(t *testing.T) {
	s := New(128)
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("over-%05d", i)
	}
	for _, id := range ids[:1000] {
		s.Add(id)
	}
	i := 0
	if n := testing.AllocsPerRun(5000, func() { s.Add(ids[1000+i%9000]); i++ }); n != 0 {
		t.Fatalf("%v allocations per Add of an untracked id, want 0", n)
	}
	s.Reset()
	if n := testing.AllocsPerRun(100, func() { s.Add(ids[i%len(ids)]); i++ }); n != 0 {
		t.Fatalf("%v allocations per Add after Reset, want 0 (the buffers are kept)", n)
	}
}

// The sketch decides exactly as the textbook form with a map from item to
// counter: the same counters, counts and errors after every Add, over
// streams that replace counters all the time in small tables, where the
// index's probe runs wrap around and its removals shift slots back.
func TestSketchMatchesMapForm(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2))
		k := 1 + r.IntN(9)
		s, ref := New(k), newMapSketch(k)
		for step := range 400 {
			id := fmt.Sprint(r.IntN(3 * k))
			s.Add(id)
			ref.add(id)
			if got, want := fmt.Sprint(s.Summary()), fmt.Sprint(ref.summary()); got != want {
				t.Fatalf("seed %d k %d step %d, after %q: %s, want %s", seed, k, step, id, got, want)
			}
			if step == 200 {
				s.Reset()
				ref = newMapSketch(k)
			}
		}
	}
}

// mapSketch is Space-Saving with a map from item to counter, a heap
// broken by the same rule as the Sketch's: the reference it must match.
type mapSketch struct {
	k     int
	index map[string]int
	items []Counter
	heap  []int
	at    []int
	total uint64
}

func newMapSketch(k int) *mapSketch { return &mapSketch{k: k, index: map[string]int{}} }

func (m *mapSketch) add(id string) {
	m.total++
	if i, ok := m.index[id]; ok {
		m.items[i].Count++
		m.down(m.at[i])
		return
	}
	if len(m.items) < m.k {
		i := len(m.items)
		m.items = append(m.items, Counter{ID: id, Count: 1})
		m.heap, m.at = append(m.heap, i), append(m.at, i)
		m.index[id] = i
		for j := i; j > 0 && m.less(j, (j-1)/2); j = (j - 1) / 2 {
			m.swap(j, (j-1)/2)
		}
		return
	}
	i := m.heap[0]
	delete(m.index, m.items[i].ID)
	m.items[i] = Counter{ID: id, Count: m.items[i].Count + 1, Error: m.items[i].Count}
	m.index[id] = i
	m.down(0)
}

func (m *mapSketch) less(i, j int) bool { return m.items[m.heap[i]].Count < m.items[m.heap[j]].Count }

func (m *mapSketch) swap(i, j int) {
	m.heap[i], m.heap[j] = m.heap[j], m.heap[i]
	m.at[m.heap[i]], m.at[m.heap[j]] = i, j
}

func (m *mapSketch) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(m.heap) {
			return
		}
		c := l
		if l+1 < len(m.heap) && m.less(l+1, l) {
			c = l + 1
		}
		if !m.less(c, i) {
			return
		}
		m.swap(i, c)
		i = c
	}
}

func (m *mapSketch) summary() Summary {
	out := Summary{Counters: slices.Clone(m.items), Total: m.total}
	if len(m.items) == m.k {
		out.Floor = m.items[m.heap[0]].Count
	}
	out.sort()
	return out
}

func BenchmarkAddUntracked(b *testing.B) {
	s := New(128)
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("over-%05d", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Add(ids[(i*7919)%len(ids)])
	}
}

func BenchmarkAddTracked(b *testing.B) {
	s := New(128)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprint("203.0.113.", i)
		s.Add(ids[i])
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Add(ids[i%len(ids)])
	}
}
