package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
)

// The ERL endpoints: Fastly's Edge Rate Limiting calls (rate counters,
// penalty boxes, check_rate) over HTTP. Each handler decodes its body or
// path (erldecode.go), calls one Limiter method, which validates every
// argument before anything is written, and answers with a wire type.

// routeERL registers the ERL routes on r; get registers a GET (and HEAD)
// route. Taking an entry out of a box is an admin operation, as a reset
// is; the others take the API token.
func (h *handler) routeERL(r chi.Router, get func(string, http.HandlerFunc)) {
	r.Post("/v1/erl/check_rate", h.authorize(accessAPI, h.checkRate))
	r.Post("/v1/erl/check_rates", h.authorize(accessAPI, h.checkRates))
	r.Post("/v1/erl/ratecounters/{ratecounter}/increment", h.authorize(accessAPI, h.increment))
	get("/v1/erl/ratecounters/{ratecounter}/*", h.authorize(accessAPI, h.lookupRateCounter))
	r.Post("/v1/erl/penaltyboxes/{penaltybox}/add", h.authorize(accessAPI, h.boxAdd))
	get("/v1/erl/penaltyboxes/{penaltybox}/*", h.authorize(accessAPI, h.boxHas))
	r.Post("/v1/erl/penaltyboxes/{penaltybox}/remove", h.authorize(accessAdmin, h.boxRemove))
}

// checkRate serves POST /v1/erl/check_rate.
func (h *handler) checkRate(w http.ResponseWriter, r *http.Request) {
	a, e := h.decodeERLCall(r, checkRateFields, nil, true)
	var ttl time.Duration
	if e == nil {
		ttl, e = parseTTL(a.ttl)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	checks := []ratelimits.RateCheck{{Counter: a.rateCounter, Delta: a.delta, Window: a.window, Limit: a.limit}}
	res, err := h.limiter.CheckRate(r.Context(), a.entry, checks, a.penaltyBox, ttl)
	if err != nil {
		h.limiterFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.CheckRateResponse{
		Penalized:          res.Penalized,
		Rate:               res.Rate(0, checks),
		PenaltyExpiresInMS: millisUp(res.PenaltyExpiresIn),
	})
}

// checkRates serves POST /v1/erl/check_rates: exactly two checks, on two
// different counters (the Limiter refuses the same counter twice).
func (h *handler) checkRates(w http.ResponseWriter, r *http.Request) {
	a, e := h.decodeERLCall(r, checkRatesFields, rateCheckFields, true)
	var ttl time.Duration
	if e == nil {
		ttl, e = parseTTL(a.ttl)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	res, err := h.limiter.CheckRate(r.Context(), a.entry, a.checks, a.penaltyBox, ttl)
	if err != nil {
		h.limiterFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.CheckRatesResponse{
		Penalized:          res.Penalized,
		Rates:              []float64{res.Rate(0, a.checks), res.Rate(1, a.checks)},
		Exceeded:           res.Exceeded,
		PenaltyExpiresInMS: millisUp(res.PenaltyExpiresIn),
	})
}

// increment serves POST /v1/erl/ratecounters/{ratecounter}/increment.
func (h *handler) increment(w http.ResponseWriter, r *http.Request) {
	counter, e := pathParam(r, "ratecounter")
	var a erlArgs
	if e == nil {
		a, e = h.decodeERLCall(r, incrementFields, nil, true)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	n, err := h.limiter.Increment(r.Context(), counter, a.entry, a.delta)
	if err != nil {
		h.limiterFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.IncrementResponse{Bucket60s: n})
}

// lookupRateCounter serves GET /v1/erl/ratecounters/{ratecounter}/{entry}:
// the entry's buckets and rates, changing nothing. The entry is the rest
// of the path, so an entry with "/" (a CIDR range) works, escaped or not.
func (h *handler) lookupRateCounter(w http.ResponseWriter, r *http.Request) {
	counter, entry, e := pathNameAndRest(r, "ratecounter")
	if e != nil {
		writeError(w, e)
		return
	}
	reading, err := h.limiter.RateCounter(r.Context(), counter, entry)
	if err != nil {
		h.limiterFailure(w, r, readOnly(err))
		return
	}
	resp := wire.RateCounterResponse{
		Entry: h.canonicalEntry(counter, entry),
		Buckets: wire.RateBuckets{S10: reading.Buckets[0], S20: reading.Buckets[1], S30: reading.Buckets[2],
			S40: reading.Buckets[3], S50: reading.Buckets[4], S60: reading.Buckets[5]},
	}
	rates := []*float64{&resp.Rates.S1, &resp.Rates.S10, &resp.Rates.S60}
	for k, window := range ratelimits.ReadingWindows {
		*rates[k] = float64(reading.Hits[k]) / float64(window)
	}
	writeJSON(w, http.StatusOK, resp)
}

// boxAdd serves POST /v1/erl/penaltyboxes/{penaltybox}/add.
func (h *handler) boxAdd(w http.ResponseWriter, r *http.Request) {
	box, e := pathParam(r, "penaltybox")
	var a erlArgs
	if e == nil {
		a, e = h.decodeERLCall(r, boxAddFields, nil, false)
	}
	var ttl time.Duration
	if e == nil {
		ttl, e = parseTTL(a.ttl)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	in, err := h.limiter.BoxAdd(r.Context(), box, a.entry, ttl)
	if err != nil {
		h.limiterFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.BoxAddResponse{PenaltyExpiresInMS: millisUp(in)})
}

// boxHas serves GET /v1/erl/penaltyboxes/{penaltybox}/{entry}, changing
// nothing. The entry is the rest of the path, as in lookupRateCounter.
func (h *handler) boxHas(w http.ResponseWriter, r *http.Request) {
	box, entry, e := pathNameAndRest(r, "penaltybox")
	if e != nil {
		writeError(w, e)
		return
	}
	has, in, err := h.limiter.BoxHas(r.Context(), box, entry)
	if err != nil {
		h.limiterFailure(w, r, readOnly(err))
		return
	}
	writeJSON(w, http.StatusOK, wire.BoxHasResponse{Has: has, PenaltyExpiresInMS: millisUp(in)})
}

// boxRemove serves POST /v1/erl/penaltyboxes/{penaltybox}/remove.
func (h *handler) boxRemove(w http.ResponseWriter, r *http.Request) {
	box, e := pathParam(r, "penaltybox")
	var a erlArgs
	if e == nil {
		a, e = h.decodeERLCall(r, boxRemoveFields, nil, false)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	removed, err := h.limiter.BoxRemove(r.Context(), box, a.entry)
	if err != nil {
		h.limiterFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.BoxRemoveResponse{Removed: removed})
}

// decodeERLCall refuses an Idempotency-Key when addsHits (see
// refuseIdempotencyKey), then reads the call's body (decodeERL).
func (h *handler) decodeERLCall(r *http.Request, fields, checkFields []string, addsHits bool) (erlArgs, *apiError) {
	if addsHits {
		if e := refuseIdempotencyKey(r); e != nil {
			return erlArgs{}, e
		}
	}
	return h.decodeERL(r, fields, checkFields)
}

// refuseIdempotencyKey refuses an Idempotency-Key on check_rate,
// check_rates and increment: they add hits every time, and no record
// replays an ERL call, so a retry "made safe" by the key would count the
// hits twice. Saying so beats ignoring the header.
func refuseIdempotencyKey(r *http.Request) *apiError {
	if len(r.Header.Values(idempotencyHeader)) == 0 {
		return nil
	}
	return badRequest(codeInvalidIdempotencyKey, "ERL calls keep no idempotency records, and this one adds hits each time it is sent; send it without an Idempotency-Key", -1)
}

// readOnly marks the source failure of a call that writes nothing (a
// lookup, a has): whatever became of it, nothing changed, so the answer is
// source_unavailable, safe to retry, not source_outcome_unknown.
func readOnly(err error) error {
	if !errors.Is(err, ratelimits.ErrSourceUnavailable) || errors.Is(err, ratelimits.ErrNotApplied) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ratelimits.ErrNotApplied)
}

// canonicalEntry is entry as the limit named counter canonicalises it, for
// an answer that shows it; entry itself if the name or the entry is no
// longer known to the configuration (a reload since the call).
func (h *handler) canonicalEntry(counter, entry string) string {
	if info, ok := h.limiter.Config().Lookup(counter); ok {
		if c, _, err := info.Kind.Canonicalize(entry); err == nil {
			return c
		}
	}
	return entry
}

// pathParam returns the URL parameter name, unescaped when the router
// matched the escaped path.
func pathParam(r *http.Request, name string) (string, *apiError) {
	v := chi.URLParam(r, name)
	if r.URL.RawPath == "" {
		return v, nil
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", badRequest(codeInvalidRequest, "the path is not validly escaped", -1)
	}
	return u, nil
}

// pathNameAndRest returns the URL parameter name and the rest of the path
// after it (the route's "*"), both unescaped when the router matched the
// escaped path. A part that is not validly escaped is an invalid id.
func pathNameAndRest(r *http.Request, name string) (string, string, *apiError) {
	v, rest := chi.URLParam(r, name), chi.URLParam(r, "*")
	if r.URL.RawPath == "" {
		return v, rest, nil
	}
	var err1, err2 error
	v, err1 = url.PathUnescape(v)
	rest, err2 = url.PathUnescape(rest)
	if err1 != nil || err2 != nil {
		return "", "", badRequest(codeInvalidID, "the path is not validly escaped", -1)
	}
	return v, rest, nil
}
