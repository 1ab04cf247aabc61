package descriptors_test

import (
	"slices"
	"testing"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
)

func join(values ...string) string {
	return descriptors.JoinValues(len(values), func(i int) string { return values[i] })
}

// One value is the id as it is; several are escaped and joined with ':',
// and values without ':' or '\' join as plainly as they always have, so
// the buckets of existing ids stay theirs.
func TestJoinValues(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{[]string{"192.0.2.1"}, "192.0.2.1"},
		{[]string{"2001:db8::1"}, "2001:db8::1"}, // one value is never escaped
		{[]string{`a\b`}, `a\b`},
		{[]string{""}, ""},
		{[]string{"k-123", "search"}, "k-123:search"},
		{[]string{"k1", "/login", "GET"}, "k1:/login:GET"},
		{[]string{"", ""}, ":"},
		{[]string{"tenant:alice", "x"}, `tenant\:alice:x`},
		{[]string{"tenant", "alice:x"}, `tenant:alice\:x`},
		{[]string{`a\`, "b"}, `a\\:b`},
		{[]string{"a", `\b`}, `a:\\b`},
		{[]string{`\:`, ":"}, `\\\::\:`},
		{[]string{"é:ü", "ß"}, `é\:ü:ß`},
	} {
		if got := join(tc.values...); got != tc.want {
			t.Errorf("JoinValues(%q) = %q, want %q", tc.values, got, tc.want)
		}
	}
}

// Every list of 2 or 3 values, each up to 3 characters of 'a', ':' and
// '\', has an id of its own: the characters that could make two lists
// meet are all there, in every arrangement short enough to try them all.
func TestJoinValuesIsInjectiveExhaustively(t *testing.T) {
	values := []string{""}
	for length, last := 1, []string{""}; length <= 3; length++ {
		var next []string
		for _, v := range last {
			for _, c := range []string{"a", ":", `\`} {
				next = append(next, v+c)
			}
		}
		values, last = append(values, next...), next
	}
	if len(values) != 40 {
		t.Fatalf("%d values, want 40", len(values))
	}
	for _, n := range []int{2, 3} {
		seen := make(map[string][]string)
		idx := make([]int, n)
		for {
			list := make([]string, n)
			for i, j := range idx {
				list[i] = values[j]
			}
			id := join(list...)
			if other, dup := seen[id]; dup {
				t.Fatalf("%q and %q both join to %q", other, list, id)
			}
			seen[id] = list
			// The next list, idx counting in base len(values).
			i := n - 1
			for ; i >= 0; i-- {
				if idx[i]++; idx[i] < len(values) {
					break
				}
				idx[i] = 0
			}
			if i < 0 {
				break
			}
		}
		if want := pow(len(values), n); len(seen) != want {
			t.Errorf("%d values: %d ids, want %d", n, len(seen), want)
		}
	}
}

func pow(b, e int) int {
	p := 1
	for range e {
		p *= b
	}
	return p
}

// Two different lists of two values never join to one id.
func FuzzJoinInjective(f *testing.F) {
	f.Add("tenant:alice", "x", "tenant", "alice:x")
	f.Add(`a\`, ":b", "a", `\:b`)
	f.Add(`\`, "", "", `\`)
	f.Add("k-123", "search", "k-123", "search")
	f.Fuzz(func(t *testing.T, a1, b1, a2, b2 string) {
		l1, l2 := []string{a1, b1}, []string{a2, b2}
		if id1, id2 := join(l1...), join(l2...); (id1 == id2) != slices.Equal(l1, l2) {
			t.Errorf("%q joins to %q and %q to %q", l1, id1, l2, id2)
		}
	})
}
