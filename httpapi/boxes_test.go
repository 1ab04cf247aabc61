package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/local"
	"github.com/limiter-dev/limiter/source/memory"
)

// An id a penalty limit denies is listed in its box with its expiry; a
// box of more than a page is listed page by page, every entry once.
func TestListBoxes(t *testing.T) {
	s := newERLServer(t, memory.New(0), nil)
	for range 4 { // Lockout allows 3, then boxes for 15m
		s.post("/v1/spend", `{"limit": "Lockout", "id": "alice"}`)
	}
	rec := s.get("/v1/admin/boxes?limit=Lockout")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	got := decode[wire.BoxesResponse](t, rec)
	want := wire.BoxesResponse{Limit: "Lockout", Entries: []wire.BoxEntry{{
		ID: "alice", ExpiresAt: start.Add(15 * time.Minute).UTC().Format("2006-01-02T15:04:05.000Z07:00"), ExpiresInMS: 900_000,
	}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("boxes = %+v, want %+v", got, want)
	}

	for i := range 250 {
		if rec := s.post("/v1/erl/penaltyboxes/PerIP/add", fmt.Sprintf(`{"entry": "192.0.2.%d", "ttl": "10m"}`, i)); rec.Code != 200 {
			t.Fatalf("add: %d %s", rec.Code, rec.Body)
		}
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		path := "/v1/admin/boxes?limit=PerIP"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		page := decode[wire.BoxesResponse](t, s.get(path))
		if len(page.Entries) > 100 || pages > 10 {
			t.Fatalf("page %d: %d entries", pages, len(page.Entries))
		}
		for _, e := range page.Entries {
			if seen[e.ID] || e.ExpiresInMS != 600_000 {
				t.Fatalf("page %d: %+v listed twice or with the wrong time", pages, e)
			}
			seen[e.ID] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 250 {
		t.Fatalf("%d ids listed, want 250", len(seen))
	}
	// Out of the box once their time has passed.
	s.clock.Add(11 * time.Minute)
	if got := decode[wire.BoxesResponse](t, s.get("/v1/admin/boxes?limit=PerIP")); len(got.Entries) != 0 || got.NextCursor != "" {
		t.Fatalf("after expiry: %+v", got)
	}
}

// A cursor belongs to the listing of the limit that gave it: given with
// another limit that has a box, it is refused, rather than read as a
// position in that box, which would leave out its entries there.
func TestListBoxesCursorOfAnotherLimit(t *testing.T) {
	s := newERLServer(t, memory.New(0), nil)
	for i := range 150 {
		if rec := s.post("/v1/erl/penaltyboxes/PerIP/add", fmt.Sprintf(`{"entry": "192.0.2.%d", "ttl": "10m"}`, i)); rec.Code != 200 {
			t.Fatalf("add: %d %s", rec.Code, rec.Body)
		}
	}
	for i := range 3 {
		if rec := s.post("/v1/erl/penaltyboxes/Burst/add", fmt.Sprintf(`{"entry": "198.51.100.%d", "ttl": "10m"}`, i)); rec.Code != 200 {
			t.Fatalf("add: %d %s", rec.Code, rec.Body)
		}
	}
	cursor := decode[wire.BoxesResponse](t, s.get("/v1/admin/boxes?limit=PerIP")).NextCursor
	if cursor == "" {
		t.Fatal("150 entries on one page")
	}
	rec := s.get("/v1/admin/boxes?limit=Burst&cursor=" + url.QueryEscape(cursor))
	if e := decode[wire.ErrorResponse](t, rec); rec.Code != http.StatusBadRequest || e.Error.Code != "invalid_argument" {
		t.Fatalf("PerIP's cursor given with Burst: %d %s, want 400 invalid_argument", rec.Code, rec.Body)
	}
	if page := decode[wire.BoxesResponse](t, s.get("/v1/admin/boxes?limit=PerIP&cursor="+url.QueryEscape(cursor))); len(page.Entries) != 50 {
		t.Fatalf("PerIP's second page: %d entries, want 50", len(page.Entries))
	}
}

// Every bad query is a 400 with the API's JSON error, and a missing admin
// token a 401.
func TestListBoxesErrors(t *testing.T) {
	s := newERLServer(t, memory.New(0), nil)
	for _, tc := range []struct{ query, code, says string }{
		{"", "invalid_argument", "limit is required"},
		{"?limit=", "invalid_argument", "limit is required"},
		{"?limit=Nope", "unknown_limit", "Nope"},
		{"?limit=Plain", "invalid_argument", "no penalty box"},
		{"?limit=Lockout&cursor=bogus", "invalid_argument", "cursor"},
		{"?limit=Lockout&cursor=m1.0", "invalid_argument", "cursor"},
		{"?limit=Lockout&cursor=", "invalid_argument", "cursor is empty"},
		{"?limit=Lockout&cursor=" + strings.Repeat("x", 2000), "invalid_argument", "too long"},
		{"?limit=Lockout&limit=PerIP", "invalid_argument", "more than once"},
		{"?limit=Lockout&page=2", "invalid_argument", "unknown query parameter"},
		{"?limit=%zz", "invalid_argument", "malformed"},
	} {
		rec := s.get("/v1/admin/boxes" + tc.query)
		body := rec.Body.String()
		if rec.Code != http.StatusBadRequest || !strings.Contains(body, `"code":"`+tc.code+`"`) || !strings.Contains(body, tc.says) {
			t.Errorf("%q: %d %s, want 400 %s saying %q", tc.query, rec.Code, body, tc.code, tc.says)
		}
	}

	admin := newERLServer(t, memory.New(0), bearer.NewTokens([][]byte{[]byte("api")}, [][]byte{[]byte("adm")}))
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"api", http.StatusUnauthorized}, {"adm", http.StatusOK}} {
		req := httptest.NewRequest(http.MethodGet, "/v1/admin/boxes?limit=Lockout", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		admin.h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("token %q: %d %s, want %d", tc.token, rec.Code, rec.Body, tc.want)
		}
	}
}

// A limit whose sync_rate is not 0 keeps its box in the local layer: the
// listing comes from there and says so; another limit's from the source.
func TestListBoxesLocal(t *testing.T) {
	must := func(l ratelimits.Limit, err error) ratelimits.Limit {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	here := must(ratelimits.NewRateCounterLimit(10*time.Second, 10, 2*time.Minute))
	here.SyncRate = -time.Second
	shared := must(ratelimits.NewRateCounterLimit(10*time.Second, 10, 2*time.Minute))
	cfg, err := ratelimits.NewConfig([]ratelimits.NameInfo{
		{Name: 310, Limit: "Here", Kind: ratelimits.KindString},
		{Name: 311, Limit: "Shared", Kind: ratelimits.KindString},
	}, map[string]ratelimits.Limit{"Here": here, "Shared": shared}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	layer, err := local.New(local.Options{Clock: clk, Timers: clock.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = layer.Close(context.Background()) })
	l, err := ratelimits.NewLimiter(cfg, layer.Front(memory.New(0)), clk)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, h: httpapi.New(httpapi.Options{Limiter: l}), clock: clk}
	for _, limit := range []string{"Here", "Shared"} {
		if rec := s.post("/v1/erl/penaltyboxes/"+limit+"/add", `{"entry": "mallory", "ttl": "5m"}`); rec.Code != 200 {
			t.Fatalf("add: %d %s", rec.Code, rec.Body)
		}
	}
	for _, tc := range []struct {
		limit string
		local bool
	}{{"Here", true}, {"Shared", false}} {
		got := decode[wire.BoxesResponse](t, s.get("/v1/admin/boxes?limit="+tc.limit))
		if got.Local != tc.local || len(got.Entries) != 1 || got.Entries[0].ID != "mallory" || got.Entries[0].ExpiresInMS != 300_000 {
			t.Errorf("%s: %+v, want mallory for 5m, local %v", tc.limit, got, tc.local)
		}
	}
	// Each lister refuses the other's cursor.
	for _, q := range []string{"limit=Here&cursor=m1.1", "limit=Shared&cursor=l1.1"} {
		if rec := s.get("/v1/admin/boxes?" + q); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, rec.Code, rec.Body)
		}
	}
}
