package descriptors_test

import (
	"testing"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
)

func join(values ...string) string {
	return descriptors.JoinValues(len(values), func(i int) string { return values[i] })
}

// One value is the id as it is; several are joined with ':' as they are.
func TestJoinValues(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{[]string{"192.0.2.1"}, "192.0.2.1"},
		{[]string{"2001:db8::1"}, "2001:db8::1"},
		{[]string{`a\b`}, `a\b`},
		{[]string{""}, ""},
		{[]string{"k-123", "search"}, "k-123:search"},
		{[]string{"k1", "/login", "GET"}, "k1:/login:GET"},
		{[]string{"", ""}, ":"},
		{[]string{"tenant:alice", "x"}, "tenant:alice:x"},
		{[]string{"tenant", "alice:x"}, "tenant:alice:x"},
		{[]string{`a\`, "b"}, `a\:b`},
		{[]string{"é:ü", "ß"}, "é:ü:ß"},
	} {
		if got := join(tc.values...); got != tc.want {
			t.Errorf("JoinValues(%q) = %q, want %q", tc.values, got, tc.want)
		}
	}
}
