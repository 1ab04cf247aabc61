package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/local"
	"github.com/limiter-dev/limiter/source/memory"
)

// flakySyncer takes pushes, or fails while down is set. It keeps no
// totals: each push's Total is its own hits, enough for these tests.
type flakySyncer struct {
	mu   sync.Mutex
	down bool
}

func (f *flakySyncer) SyncWindows(_ context.Context, _ int64, pushes []syncpush.Window) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("connection refused")
	}
	for i := range pushes {
		p := &pushes[i]
		p.Total.Period, p.Total.Start, p.Total.Cur, p.Total.Prev = p.Period, p.Start, p.Hits, p.PrevHits
	}
	return nil
}

func (f *flakySyncer) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// newSyncHandler serves a Limiter with a local layer on syncer: Synced is
// a sliding window of 10 per hour, synced every minute.
func newSyncHandler(t *testing.T, syncer syncpush.WindowSyncer, admin ...string) http.Handler {
	t.Helper()
	win, err := ratelimits.NewWindowLimit(ratelimits.SlidingWindow, 10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	win.SyncRate = time.Minute
	cfg, err := ratelimits.NewConfig([]ratelimits.NameInfo{{Name: 300, Limit: "Synced", Kind: ratelimits.KindString}},
		map[string]ratelimits.Limit{"Synced": win}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	layer, err := local.New(local.Options{Syncer: syncer, Clock: clk, Timers: clock.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = layer.Close(context.Background()) })
	l, err := ratelimits.NewLimiter(cfg, layer.Front(memory.New(0)), clk)
	if err != nil {
		t.Fatal(err)
	}
	var tokens [][]byte
	for _, a := range admin {
		tokens = append(tokens, []byte(a))
	}
	return httpapi.New(httpapi.Options{Limiter: l, Tokens: bearer.NewTokens(nil, tokens), Sync: layer.Sync})
}

func syncAnswer(t *testing.T, h http.Handler, token string) wire.SyncResponse {
	t.Helper()
	rec := call(h, "POST", "/v1/admin/sync", token, "")
	var res wire.SyncResponse
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &res) != nil {
		t.Fatalf("POST /v1/admin/sync: %d %s", rec.Code, rec.Body)
	}
	return res
}

// The sync endpoint answers what the cycle did: counters pushed and
// counters read; a failed push is a 503 whose hits the next call pushes.
func TestSyncEndpoint(t *testing.T) {
	syncer := &flakySyncer{}
	h := newSyncHandler(t, syncer)
	for _, id := range []string{"a", "b"} {
		if rec := call(h, "POST", "/v1/spend", "", `{"limit":"Synced","id":"`+id+`"}`); rec.Code != 200 {
			t.Fatalf("spend: %d %s", rec.Code, rec.Body)
		}
	}
	syncer.setDown(true)
	rec := call(h, "POST", "/v1/admin/sync", "", "")
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"code":"sync_failed"`) || !strings.Contains(rec.Body.String(), "connection refused") {
		t.Fatalf("sync with the source down: %d %s", rec.Code, rec.Body)
	}
	syncer.setDown(false)
	if res := syncAnswer(t, h, ""); res != (wire.SyncResponse{Pushed: 2, Fetched: 2}) {
		t.Fatalf("sync once the source is back: %+v, want 2 pushed, 2 fetched", res)
	}
	if res := syncAnswer(t, h, ""); res != (wire.SyncResponse{Pushed: 0, Fetched: 2}) {
		t.Fatalf("sync with nothing new: %+v, want 0 pushed, 2 fetched", res)
	}
}

// Without a local layer (a memory source, or no synced limit) the answer
// is zero; with admin tokens the route needs one, as reload does.
func TestSyncEndpointWithoutLocalLayerAndTokens(t *testing.T) {
	l, _ := newLimiter(t, memory.New(0))
	h := httpapi.New(httpapi.Options{Limiter: l})
	if res := syncAnswer(t, h, ""); res != (wire.SyncResponse{}) {
		t.Fatalf("sync without a local layer: %+v", res)
	}
	if rec := call(h, "POST", "/v1/admin/sync", "", ""); rec.Body.String() != `{"pushed":0,"fetched":0}`+"\n" {
		t.Fatalf("body %q", rec.Body)
	}
	if rec := call(h, "GET", "/v1/admin/sync", "", ""); rec.Code != 405 {
		t.Fatalf("GET /v1/admin/sync: %d, want 405", rec.Code)
	}
	h = newSyncHandler(t, &flakySyncer{}, "boss")
	if rec := call(h, "POST", "/v1/admin/sync", "", ""); rec.Code != 401 {
		t.Fatalf("sync without the admin token: %d, want 401", rec.Code)
	}
	syncAnswer(t, h, "boss")
}
