package spacesaving

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestMerge(t *testing.T) {
	tests := []struct {
		name  string
		parts []Summary
		want  Summary
	}{
		{"none", nil, Summary{}},
		{"one", []Summary{{Counters: []Counter{{"a", 2, 0}}, Total: 2}}, Summary{Counters: []Counter{{"a", 2, 0}}, Total: 2}},
		{"exact parts add up", []Summary{
			{Counters: []Counter{{"a", 2, 0}, {"b", 1, 0}}, Total: 3},
			{Counters: []Counter{{"b", 3, 0}}, Total: 3},
		}, Summary{Counters: []Counter{{"b", 4, 0}, {"a", 2, 0}}, Total: 6}},
		{"an item a full part does not list gets its floor, as count and error", []Summary{
			{Counters: []Counter{{"a", 5, 0}, {"b", 2, 1}}, Floor: 2, Total: 7},
			{Counters: []Counter{{"c", 4, 0}}, Total: 4},
		}, Summary{Counters: []Counter{{"c", 6, 2}, {"a", 5, 0}, {"b", 2, 1}}, Floor: 2, Total: 11}},
		{"ties by id", []Summary{{Counters: []Counter{{"b", 1, 0}, {"a", 1, 0}}, Total: 2}, {Total: 0}},
			Summary{Counters: []Counter{{"a", 1, 0}, {"b", 1, 0}}, Total: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Merge(tt.parts...)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Merge = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConcatAndTop(t *testing.T) {
	a := Summary{Counters: []Counter{{"a", 5, 0}, {"c", 1, 0}}, Floor: 1, Total: 6}
	b := Summary{Counters: []Counter{{"b", 3, 2}}, Floor: 2, Total: 3}
	got := Concat(a, b)
	want := Summary{Counters: []Counter{{"a", 5, 0}, {"b", 3, 2}, {"c", 1, 0}}, Floor: 2, Total: 9}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Concat = %v, want %v", got, want)
	}
	top := got.Top(1)
	if len(top.Counters) != 1 || top.Floor != 3 || top.Total != 9 {
		t.Fatalf("Top(1) = %v, want a alone with floor 3", top)
	}
	if all := got.Top(10); len(all.Counters) != 3 || all.Floor != 2 {
		t.Fatalf("Top(10) = %v, want all three, floor kept", all)
	}
}

// Sketches of the buckets of one stream, merged, keep the bounds, and
// every item with at least 1% of the stream is among the 100 highest,
// even when many items sit near 1%.
func TestMergedBucketsKeepTheGuarantee(t *testing.T) {
	for seed := range uint64(3) {
		r := rand.New(rand.NewPCG(seed, 2))
		const k = 128
		var parts []Summary
		truth := map[string]uint64{}
		for range 6 {
			s := New(k)
			for range 20000 {
				var id string
				switch x := r.IntN(100); {
				case x < 60: // near-ties around 1% each
					id = fmt.Sprint("hot-", r.IntN(60))
				default: // a long tail of distinct ids
					id = fmt.Sprint("tail-", r.Uint64())
				}
				s.Add(id)
				truth[id]++
			}
			parts = append(parts, s.Summary())
		}
		m := Merge(parts...)
		check(t, m, truth, 0)
		top := m.Top(100)
		in := map[string]bool{}
		for _, c := range top.Counters {
			in[c.ID] = true
		}
		for id, n := range truth {
			if n*100 >= m.Total && !in[id] {
				t.Errorf("seed %d: %s has %d of %d, not in the top 100", seed, id, n, m.Total)
			}
		}
	}
}
