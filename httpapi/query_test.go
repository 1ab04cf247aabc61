package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// An unknown query parameter's refusal says what the path does take, also
// when that is nothing.
func TestQueryParamsRefusalNamesWhatThePathTakes(t *testing.T) {
	for _, tc := range []struct {
		known []string
		want  string
	}{
		{nil, "this path takes no query parameters"},
		{[]string{"limit", "window"}, "this path takes limit, window"},
	} {
		r := httptest.NewRequest("GET", "/x?page=2", nil)
		_, e := queryParams(r, tc.known...)
		if e == nil {
			t.Fatalf("known %q: page=2 accepted", tc.known)
		}
		if !strings.HasSuffix(e.message, tc.want) {
			t.Errorf("known %q: message %q, want it to end with %q", tc.known, e.message, tc.want)
		}
	}
}
