// Package httpapi is the HTTP front end of the limiter: it decodes and
// validates JSON into transactions, asks a ratelimits.Limiter, and encodes
// the answer (body, RateLimit headers, status). It knows nothing of how
// buckets are stored. The contract it serves is docs/api.md.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/decisionmetrics"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/topdenied"
	"github.com/limiter-dev/limiter/ui"
)

// DefaultMaxBodyBytes is the largest request body accepted by default.
const DefaultMaxBodyBytes = 1 << 20

// DefaultMaxBatch is the most transactions one request may carry by default.
const DefaultMaxBatch = 100

// Options configures the handler.
type Options struct {
	// Limiter decides; required.
	Limiter *ratelimits.Limiter
	// Logger receives one line per panic or source failure; nil discards.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies (DefaultMaxBodyBytes when <= 0).
	MaxBodyBytes int64
	// MaxBatch bounds transactions per request (DefaultMaxBatch when <= 0).
	MaxBatch int
	// Registry receives the handler's metrics and the Go runtime
	// collectors, and is served at /metrics. Nil makes a new one.
	Registry *prometheus.Registry
	// Decisions, when set, are the decision series shared with the other
	// front ends, already registered; nil makes and registers them.
	Decisions *decisionmetrics.Metrics
	// OmitMetrics leaves /metrics off this handler, for when metrics are
	// served on a listener of their own.
	OmitMetrics bool
	// APITokens, when any are set, are required (as "Authorization: Bearer
	// <token>") on every /v1/ call. AdminTokens, when any are set, are
	// required on reset and reload, where an API token is then not enough;
	// an admin token is accepted everywhere an API token is.
	APITokens   [][]byte
	AdminTokens [][]byte
	// Tokens, when set, is used instead of APITokens and AdminTokens: the
	// same two sets, replaceable while the handler serves (a reload).
	Tokens *bearer.Tokens
	// Reload, when set, is called by POST /v1/admin/reload to load the
	// configuration files again. Its error is shown to the caller.
	Reload func() error
	// Sync, when set, is called by POST /v1/admin/sync to run one sync
	// cycle of every limit whose sync_rate is above 0 (source/local's
	// Layer.Sync), and answers how many counters it pushed and read back;
	// nil answers 0 and 0: nothing syncs. Its error is shown to the caller.
	Sync func(ctx context.Context) (pushed, fetched int, err error)
	// ReloadStatus, when set, answers GET /v1/admin/reload: the last
	// attempt to load the configuration files and what is in use.
	ReloadStatus func() wire.ReloadStatusResponse
	// ForwardAuth, when set, returns the forward-auth rules in use, read
	// on every call so that a reload can swap them; nil, or a nil answer,
	// means no rules: every /v1/forward-auth/{rule} is a 404.
	ForwardAuth func() *forwardauth.Rules
	// TopDenied, when set, answers GET /v1/admin/top: the ids denied
	// most. Its counts come from the denials Decisions hands it
	// (decisionmetrics.WithDenials).
	TopDenied topdenied.Lister
	// AccessLog logs one line per request (method and route as the
	// metrics label them, status, duration; never the raw path, which can
	// carry ids, nor a method name outside the standard set).
	AccessLog bool
}

// handler holds what every route needs.
type handler struct {
	limiter   *ratelimits.Limiter
	log       *slog.Logger
	maxBody   int64
	maxBatch  int
	metrics   *metrics
	bufs      sync.Pool
	tokens    *bearer.Tokens
	reload    func() error
	sync      func(context.Context) (pushed, fetched int, err error)
	accessLog bool
	// reloadStatus answers GET /v1/admin/reload; nil: not served.
	reloadStatus func() wire.ReloadStatusResponse
	// forwardAuthSet returns the forward-auth rules; nil: none.
	forwardAuthSet func() *forwardauth.Rules
	top            topdenied.Lister
	// routes are the registered patterns, the only route label values
	// besides routeUnmatched. Set once the router is built.
	routes routeSet
}

// New returns the API's http.Handler.
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	h := &handler{
		limiter:   opts.Limiter,
		log:       opts.Logger,
		maxBody:   opts.MaxBodyBytes,
		maxBatch:  opts.MaxBatch,
		metrics:   newMetrics(opts.Registry, opts.Decisions),
		tokens:    opts.Tokens,
		reload:    opts.Reload,
		sync:      opts.Sync,
		accessLog: opts.AccessLog,

		reloadStatus:   opts.ReloadStatus,
		forwardAuthSet: opts.ForwardAuth,
		top:            opts.TopDenied,
	}
	if h.tokens == nil {
		h.tokens = bearer.NewTokens(opts.APITokens, opts.AdminTokens)
	}
	h.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }

	r := chi.NewRouter()
	r.Use(h.recoverPanics, h.observe)
	r.NotFound(notFound)
	// Every method of forward-auth: the standard ones are registered
	// below; the router sends any other here, as a method it does not
	// know.
	forwardAuth := h.authorize(accessAPI, h.forwardAuth)
	r.MethodNotAllowed(forwardAuthOr(forwardAuth, methodNotAllowed(r)))
	// get serves a GET route and HEAD on the same path: net/http sends
	// the headers and drops the body.
	get := func(pattern string, fn http.HandlerFunc) {
		r.Get(pattern, fn)
		r.Head(pattern, fn)
	}
	r.Post("/v1/spend", h.authorize(accessAPI, h.spend))
	r.Post("/v1/check", h.authorize(accessAPI, h.check))
	r.Post("/v1/refund", h.authorize(accessAPI, h.refund))
	r.Post("/v1/release", h.authorize(accessAPI, h.release))
	r.Post("/v1/renew", h.authorize(accessAPI, h.renew))
	r.Post("/v1/reset", h.authorize(accessAdmin, h.reset))
	get("/v1/limits", h.authorize(accessAPI, h.limits))
	get("/v1/limits/{limit}/*", h.authorize(accessAPI, h.subscriber))
	h.routeERL(r, get)
	// Any method: a proxy asks with GET, HEAD or the client's own. The
	// standard ones are named one by one (the router's any-method
	// registration takes only the methods it knows), and forwardAuthOr
	// serves the rest.
	for _, m := range standardMethods() {
		r.MethodFunc(m, "/v1/forward-auth/{rule}", forwardAuth)
	}
	if h.reload != nil {
		r.Post("/v1/admin/reload", h.authorize(accessAdmin, h.reloadConfig))
	}
	if h.reloadStatus != nil {
		get("/v1/admin/reload", h.authorize(accessAdmin, h.lastReload))
	}
	r.Post("/v1/admin/sync", h.authorize(accessAdmin, h.syncNow))
	if h.top != nil {
		get("/v1/admin/top", h.authorize(accessAdmin, h.topDenied))
	}
	get("/v1/admin/boxes", h.authorize(accessAdmin, h.listBoxes))
	get("/healthz", h.healthz)
	get("/readyz", h.readyz)
	get(openAPIPath, serveOpenAPI)
	// The operator's page needs no token to load: it holds nothing but
	// itself, and asks for the admin token before it reads the API.
	get("/ui/", ui.Handler().ServeHTTP)
	get("/ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	if !opts.OmitMetrics {
		get("/metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{}).ServeHTTP)
	}
	h.routes = registeredRoutes(r)
	return r
}

// spend serves POST /v1/spend; an Idempotency-Key makes it safe to retry.
func (h *handler) spend(w http.ResponseWriter, r *http.Request) {
	bd, ok, err := h.decideKeyed(w, r, h.limiter.SpendOnce, h.limiter.Spend)
	if !ok || !h.settle(w, r, "spend", bd, err) {
		return
	}
	setRateLimitHeaders(w.Header(), bd)
	h.writeBatch(w, bd)
}

// check serves POST /v1/check. A check changes nothing, so it needs no
// Idempotency-Key and ignores one.
func (h *handler) check(w http.ResponseWriter, r *http.Request) {
	txns, e := h.decodeTransactions(r, decisionBody)
	if e != nil {
		writeError(w, e)
		return
	}
	bd, err := h.limiter.Check(r.Context(), txns)
	if !h.settle(w, r, "check", bd, err) {
		return
	}
	setRateLimitHeaders(w.Header(), bd)
	h.writeBatch(w, bd)
}

// refund serves POST /v1/refund; an Idempotency-Key makes it safe to
// retry. A refund limits nothing, so it sends no RateLimit headers.
func (h *handler) refund(w http.ResponseWriter, r *http.Request) {
	bd, ok, err := h.decideKeyed(w, r, h.limiter.RefundOnce, h.limiter.Refund)
	if ok && h.settle(w, r, "refund", bd, err) {
		h.writeBatch(w, bd)
	}
}

// decideKeyed reads a spend's or refund's Idempotency-Key and its
// transactions, and decides them with once under the key, or with plain
// when the request sends none. A request refused before that is answered
// here, and ok is false.
func (h *handler) decideKeyed(w http.ResponseWriter, r *http.Request,
	once func(context.Context, string, []ratelimits.Transaction) (*ratelimits.BatchDecision, error),
	plain func(context.Context, []ratelimits.Transaction) (*ratelimits.BatchDecision, error),
) (bd *ratelimits.BatchDecision, ok bool, err error) {
	key, e := h.idempotencyKey(r)
	if e == nil {
		var txns []ratelimits.Transaction
		if txns, e = h.decodeTransactions(r, decisionBody); e == nil {
			if key != "" {
				bd, err = once(r.Context(), key, txns)
			} else {
				bd, err = plain(r.Context(), txns)
			}
			return bd, true, err
		}
	}
	writeError(w, e)
	return nil, false, nil
}

// settle deals with the Limiter's answer to a spend, check or refund
// before its body is written. A failure, or a client that went away, is
// answered here and settle returns false. Otherwise a replayed or degraded
// answer is marked, logged and counted, and the decisions are counted
// under op, the route's metrics label.
func (h *handler) settle(w http.ResponseWriter, r *http.Request, op string, bd *ratelimits.BatchDecision, err error) bool {
	if err != nil {
		h.limiterFailure(w, r, err)
		return false
	}
	if bd.Degraded && clientGone(r, bd.Cause) {
		h.clientCancelled(w, r, bd.Cause)
		return false
	}
	if bd.Replayed {
		h.metrics.replays.WithLabelValues(op).Inc()
		w.Header().Set(replayedHeader, "true")
	}
	if bd.Degraded {
		h.metrics.Degraded()
		h.log.Warn("source failed; answering allowed (fail-open)", "route", h.routes.label(r), "err", bd.Cause)
	}
	if !bd.Replayed {
		h.metrics.CountDecisions(op, bd)
	}
	return true
}

// writeBatch sends a batch decision with the hand encoder, in a pooled
// buffer.
func (h *handler) writeBatch(w http.ResponseWriter, bd *ratelimits.BatchDecision) {
	h.writeBatchStatus(w, http.StatusOK, bd, bd.Decisions)
}

// writeBatchStatus is writeBatch with another status and only some of the
// decisions: forward-auth's denials, and the decisions its rules show.
func (h *handler) writeBatchStatus(w http.ResponseWriter, status int, bd *ratelimits.BatchDecision, decisions []ratelimits.Decision) {
	bufp := h.bufs.Get().(*[]byte)
	buf := appendBatchOf((*bufp)[:0], bd, decisions)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf)
	h.putBuffer(bufp, buf)
}

// putBuffer returns a buffer to the pool, unless it grew so large that
// keeping it would hold rare huge bodies in memory.
func (h *handler) putBuffer(bufp *[]byte, buf []byte) {
	if cap(buf) > 64<<10 {
		return
	}
	*bufp = buf[:0]
	h.bufs.Put(bufp)
}

// limiterFailure answers a Limiter error: the client's mistake is a 400,
// a source failure a 503 that is also logged and counted, and a client
// that went away while the source was asked is neither.
func (h *handler) limiterFailure(w http.ResponseWriter, r *http.Request, err error) {
	h.limiterFailureAs(w, r, err, nil)
}

// limiterFailureAs is limiterFailure for a route that words the error its
// own way: adjust, when not nil, may change the error before it is sent.
func (h *handler) limiterFailureAs(w http.ResponseWriter, r *http.Request, err error, adjust func(*apiError)) {
	if clientGone(r, err) {
		h.clientCancelled(w, r, err)
		return
	}
	e := limiterError(err)
	if adjust != nil {
		adjust(e)
	}
	if e.status == http.StatusServiceUnavailable {
		h.metrics.SourceError()
		h.log.Error("source failed", "route", h.routes.label(r), "err", err)
	}
	writeError(w, e)
}

// statusClientClosedRequest is the status recorded for a request whose
// client went away before its answer (nginx's 499). Nobody reads it; it
// keeps such requests apart from answered ones in the request metric and
// the access log.
const statusClientClosedRequest = 499

// clientGone reports whether err is the request's own cancellation: the
// client hung up (net/http then cancels the request's context) and the
// source call ended because of it. A source timeout is a deadline, not a
// cancellation, so it stays a source failure.
func clientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// clientCancelled records a request its client abandoned. The source did
// not fail, so it is neither a source error nor worth more than a debug
// line.
func (h *handler) clientCancelled(w http.ResponseWriter, r *http.Request, err error) {
	h.metrics.ClientCancelled()
	h.log.Debug("client went away before the answer", "route", h.routes.label(r), "err", err)
	w.WriteHeader(statusClientClosedRequest)
}

func (h *handler) reset(w http.ResponseWriter, r *http.Request) {
	txns, e := h.decodeTransactions(r, resetBody)
	if e != nil {
		writeError(w, e)
		return
	}
	n, err := h.limiter.Reset(r.Context(), txns)
	if err != nil {
		h.limiterFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ResetResponse{Reset: n})
}

// subscriber serves GET /v1/limits/{limit}/{id}: the effective limit for
// one subscriber and its bucket as a cost-0 check. The id is the rest of
// the path, so ids that contain "/" (CIDR ranges) work, escaped or not.
func (h *handler) subscriber(w http.ResponseWriter, r *http.Request) {
	limit, id, e := pathNameAndRest(r, "limit")
	if e != nil {
		writeError(w, e)
		return
	}
	d, err := h.limiter.Inspect(r.Context(), limit, id)
	if err != nil {
		h.limiterFailure(w, r, err)
		return
	}
	bufp := h.bufs.Get().(*[]byte)
	buf := append(appendDecision((*bufp)[:0], &d, true), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf)
	h.putBuffer(bufp, buf)
}

// limits serves GET /v1/limits: every known name, how it counts, its
// default (null when it has none) and how many overrides are loaded for it.
func (h *handler) limits(w http.ResponseWriter, _ *http.Request) {
	cfg := h.limiter.Config()
	names := cfg.Names()
	resp := wire.LimitsResponse{Limits: make([]wire.LimitResponse, 0, len(names))}
	for _, n := range names {
		alg := cfg.Algorithm(n.Name)
		l := wire.LimitResponse{
			Limit:     n.Limit,
			Enum:      int(n.Name),
			IDKind:    n.Kind.String(),
			Declared:  n.Declared,
			Algorithm: alg.String(),
			Overrides: cfg.OverrideCount(n.Name),
			Shadow:    cfg.Shadow(n.Name),
		}
		if hasSyncRate(alg) {
			syncRate := cfg.SyncRate(n.Name).Seconds()
			l.SyncRate = &syncRate
		}
		if cfg.HasBox(n.Name) {
			l.Capacity = cfg.Capacity(n.Name)
		}
		if def, ok := cfg.Default(n.Name); ok {
			l.Default = limitSettings(def)
		}
		resp.Limits = append(resp.Limits, l)
	}
	writeJSON(w, http.StatusOK, resp)
}

// limitSettings is a default limit as the configuration files spell it:
// a GCRA limit's burst, count and period, a window's count and period, a
// calendar limit's count, period word and timezone, a rate counter's
// window, rate and penalty; and any other limit's penalty
// when it has one.
func limitSettings(l ratelimits.Limit) *wire.LimitSettings {
	var s wire.LimitSettings
	switch {
	case l.Algorithm == ratelimits.RateCounter:
		s.Window, s.Rate = l.Period.String(), l.Rate
	case l.Algorithm.Windowed() || l.Algorithm == ratelimits.Concurrency:
		s.Count, s.Period = l.Count, l.Period.String()
	case l.Algorithm == ratelimits.Calendar:
		s.Count, s.Period, s.Timezone = l.Count, l.PeriodName(), l.Zone()
	default:
		s.Burst, s.Count, s.Period = l.Burst, l.Count, l.Period.String()
	}
	if l.Penalty > 0 {
		s.Penalty = l.Penalty.String()
	}
	return &s
}

// hasSyncRate reports whether limits of alg have a sync_rate: windows and
// rate counters, which count hits that a process may keep for a while.
func hasSyncRate(alg ratelimits.Algorithm) bool {
	return alg.Windowed() || alg == ratelimits.RateCounter
}

// reloadConfig serves POST /v1/admin/reload: the files are loaded and
// validated whole; a failure leaves the running configuration untouched
// and answers 422 with every problem.
func (h *handler) reloadConfig(w http.ResponseWriter, _ *http.Request) {
	if err := h.reload(); err != nil {
		writeError(w, &apiError{status: http.StatusUnprocessableEntity, code: codeReloadFailed, message: err.Error(), transaction: -1})
		return
	}
	writeJSON(w, http.StatusOK, wire.ReloadResponse{Reloaded: true})
}

// lastReload serves GET /v1/admin/reload: the last attempt to load the
// configuration files and what is in use since the last that succeeded.
func (h *handler) lastReload(w http.ResponseWriter, r *http.Request) {
	if _, e := queryParams(r); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, h.reloadStatus())
}

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.StatusResponse{Status: "ok"})
}

// readyz is 200 when a configuration is loaded and the source answers.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.limiter.Config() == nil {
		writeJSON(w, http.StatusServiceUnavailable, wire.StatusResponse{Status: "unavailable", Error: "no configuration loaded"})
		return
	}
	if err := h.limiter.Ready(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, wire.StatusResponse{Status: "unavailable", Error: "source does not answer"})
		return
	}
	writeJSON(w, http.StatusOK, wire.StatusResponse{Status: "ok"})
}

// recoverPanics turns a panic in a handler into a logged 500: one bad
// request must never take the process down.
func (h *handler) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				// Without the stack, nothing says where it came from.
				h.log.Error("panic in handler", "route", h.routes.label(r), "panic", v, "stack", string(debug.Stack()))
				writeError(w, &apiError{status: http.StatusInternalServerError, code: codeInternal, message: "internal error", transaction: -1})
			}
		}()
		next.ServeHTTP(w, r)
	})
}
