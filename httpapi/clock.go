package httpapi

import (
	"net/http"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// fakeClockHandler moves the fake clock that LIMITER_FAKECLOCK starts, so
// black-box tests can step time exactly. It is mounted only then.
type fakeClockHandler struct {
	clock clock.FakeClock
}

// move serves POST /debug/clock: {"advance": "<Go duration>"} or
// {"set": "<RFC 3339 time>"}, exactly one of them.
func (f fakeClockHandler) move(w http.ResponseWriter, r *http.Request) {
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
	if e := decodeStrict(body, &req, noTransaction); e != nil {
		writeError(w, e)
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
		f.clock.Add(d)
	default:
		t, err := time.Parse(time.RFC3339Nano, *req.Set)
		if err != nil {
			writeError(w, badRequest(codeInvalidRequest, "set: "+err.Error(), -1))
			return
		}
		f.clock.Set(t)
	}
	f.read(w, r)
}

// read serves GET /debug/clock: the fake clock's time.
func (f fakeClockHandler) read(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.ClockResponse{Now: f.clock.Now().UTC().Format(time.RFC3339Nano)})
}
