package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/httpapi/wire"
)

// debugClockPath is where the fake clock is served.
const debugClockPath = "/debug/clock"

// WithDebugClock serves /debug/clock, which moves and reads fake, beside
// api, for black-box tests that step time exactly; every other path goes
// to api. Mount it only when the Limiter runs on fake: without it the path
// does not exist (api answers 404).
//
// Moving the clock changes every bucket's state, so the route needs what
// reset needs: an admin token of tokens when admin tokens are set, else an
// API token when those are, else nothing.
func WithDebugClock(api http.Handler, fake clock.FakeClock, tokens *bearer.Tokens) http.Handler {
	d := debugClock{clock: fake}
	r := chi.NewRouter()
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed(r))
	r.Post(debugClockPath, authorize(tokens, accessAdmin, d.move))
	r.Get(debugClockPath, authorize(tokens, accessAdmin, d.read))
	r.Head(debugClockPath, authorize(tokens, accessAdmin, d.read))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// The path as the API's router would match it: an escaped path
		// ("/debug%2Fclock") is not this route, as it is not for the API.
		if req.URL.RawPath == "" && req.URL.Path == debugClockPath {
			r.ServeHTTP(w, req)
			return
		}
		api.ServeHTTP(w, req)
	})
}

// debugClock moves the fake clock the Limiter runs on.
type debugClock struct {
	clock clock.FakeClock
}

// move serves POST /debug/clock: {"advance": "<Go duration>"} or
// {"set": "<RFC 3339 time>"}, exactly one of them.
func (f debugClock) move(w http.ResponseWriter, r *http.Request) {
	if e := checkContentType(r); e != nil {
		writeError(w, e)
		return
	}
	body, e := readBody(r, 4096, nil)
	if e != nil {
		writeError(w, e)
		return
	}
	var req wire.ClockRequest
	if f := decodeObject(body, &req); f != nil {
		writeError(w, f.plain())
		return
	}
	switch {
	case (req.Advance == nil) == (req.Set == nil):
		writeError(w, badRequest(codeInvalidRequest, `send exactly one of "advance" (a Go duration) or "set" (an RFC 3339 time)`, -1))
		return
	case req.Advance != nil:
		d, err := time.ParseDuration(*req.Advance)
		if err != nil {
			writeError(w, badRequest(codeInvalidRequest, "advance: "+err.Error(), -1))
			return
		}
		if e := unixNanoRange("advance", f.clock.Now(), d); e != nil {
			writeError(w, e)
			return
		}
		f.clock.Add(d)
	default:
		t, err := time.Parse(time.RFC3339Nano, *req.Set)
		if err != nil {
			writeError(w, badRequest(codeInvalidRequest, "set: "+err.Error(), -1))
			return
		}
		if e := unixNanoRange("set", t, 0); e != nil {
			writeError(w, e)
			return
		}
		f.clock.Set(t)
	}
	f.read(w, r)
}

// Every decision reads the clock as Unix nanoseconds in an int64, so the
// fake clock moves only within the instants that has: 1677-09-21 to
// 2262-04-11.
var (
	earliestClock = time.Unix(0, math.MinInt64)
	latestClock   = time.Unix(0, math.MaxInt64)
)

// unixNanoRange refuses a move of the clock to t + d outside them. An
// advance of the most negative duration, whose negation overflows, is
// refused wherever it would land.
func unixNanoRange(field string, t time.Time, d time.Duration) *apiError {
	if t.Before(earliestClock) || t.After(latestClock) ||
		(d > 0 && latestClock.Sub(t) < d) || (d < 0 && (d == math.MinInt64 || t.Sub(earliestClock) < -d)) {
		return badRequest(codeInvalidRequest, field+": the clock would leave the instants an int64 of Unix nanoseconds holds, "+
			earliestClock.UTC().Format(time.RFC3339Nano)+" to "+latestClock.UTC().Format(time.RFC3339Nano), -1)
	}
	return nil
}

// read serves GET /debug/clock: the fake clock's time.
func (f debugClock) read(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.ClockResponse{Now: f.clock.Now().UTC().Format(time.RFC3339Nano)})
}
