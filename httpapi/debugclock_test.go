package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/source/memory"
)

// The fake clock moves only within the instants a decision can read, an
// int64 of Unix nanoseconds: a move outside them is refused and leaves
// the clock where it was. Before 1970 is within them.
func TestDebugClockStaysWithinUnixNanoseconds(t *testing.T) {
	s := newServer(t, memory.New(0), true)
	for _, body := range []string{
		`{"set":"2300-01-01T00:00:00Z"}`,
		`{"set":"0001-01-01T00:00:00Z"}`,
		`{"advance":"2562047h"}`,
		`{"set":"1600-01-01T00:00:00Z"}`,
	} {
		rec := s.post("/debug/clock", body)
		if e := decode[wire.ErrorResponse](t, rec); rec.Code != http.StatusBadRequest || e.Error.Code != "invalid_request" {
			t.Errorf("%s: %d %+v, want 400 invalid_request", body, rec.Code, e)
		}
		if !s.clock.Now().Equal(start) {
			t.Fatalf("%s moved the clock to %v", body, s.clock.Now())
		}
	}
	if rec := s.post("/debug/clock", `{"set":"1960-01-01T00:00:00Z"}`); rec.Code != http.StatusOK {
		t.Fatalf("a time before 1970: %d %s", rec.Code, rec.Body)
	}
	// The most negative duration, whose negation overflows, from 1960:
	// 1667, before the earliest instant.
	if rec := s.post("/debug/clock", `{"advance":"-2562047h47m16.854775808s"}`); rec.Code != http.StatusBadRequest {
		t.Fatalf("an advance to 1667: %d %s, want 400", rec.Code, rec.Body)
	}
	for range 2 {
		if rec := s.post("/v1/spend", `{"limit":"NewOrdersPerAccount","id":"1","cost":1}`); rec.Code != http.StatusOK {
			t.Fatalf("a spend before 1970: %d %s", rec.Code, rec.Body)
		}
	}
}
