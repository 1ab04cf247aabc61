package httpapi

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/httpapi/headers"
	"github.com/limiter-dev/limiter/ratelimits"
)

// codeMissingID is the error code of a forward-auth call whose rule
// cannot find an id it needs (missing: deny).
const codeMissingID = "missing_id"

// forwardAuth serves /v1/forward-auth/{rule}, any method: a reverse proxy
// asks whether the request it holds may pass. The rule turns the request
// the proxy describes into one atomic spend; the answer is the spend's
// decision, as much of it as the rule's expose shows, with 200 when
// allowed and the rule's deny status when not, since a proxy reads the
// status, not the body.
func (h *handler) forwardAuth(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 && r.ProtoMajor == 1 {
		// The body is never read. net/http would otherwise read what is
		// left of it before answering, to reuse the connection, and a
		// proxy that sends a request's Content-Length without its body
		// (nginx with proxy_pass_request_body off, unless the header is
		// cleared too) would wait for an answer that waits for the body.
		// Closing the connection after the answer needs no body.
		w.Header().Set("Connection", "close")
	}
	name, _ := forwardAuthRule(r)
	for attempt := 1; ; attempt++ {
		rules := h.forwardAuthRules()
		rule, ok := rules.Rule(name)
		if !ok {
			writeError(w, &apiError{status: http.StatusNotFound, code: codeNotFound, transaction: -1,
				message: "no forward-auth rule named " + strconv.Quote(shorten(name, forwardauth.MaxNameLength))})
			return
		}
		txns, e := h.forwardAuthBatch(r, rules, rule)
		if e != nil {
			writeError(w, e)
			return
		}
		if len(txns) == 0 {
			// No limit applies: every id was missing and the rule lets
			// such requests pass (missing: allow), or the limits count
			// IPv6 ranges and the client is IPv4. Nothing counts them.
			if rule.Expose == forwardauth.ExposeNone {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(nothingCounted)
			return
		}
		bd, err := h.limiter.Spend(r.Context(), txns)
		if attempt == 1 && errors.Is(err, ratelimits.ErrUnknownLimit) {
			// A reload swaps the rules and the limits one after the
			// other: between the two, a rule can name a limit not in use
			// yet (or any more). Asked again, the rules and limits in use
			// then agree.
			continue
		}
		if err != nil {
			// A transaction's index means nothing to a proxy: the message
			// names the limit instead.
			h.limiterFailureAs(w, r, err, func(e *apiError) {
				if e.transaction >= 0 && e.transaction < len(txns) {
					e.message = "limit " + txns[e.transaction].Limit + ": " + e.message
				}
				e.transaction = -1
			})
			return
		}
		if !h.settle(w, r, "forward_auth", bd, nil) {
			return
		}
		status := http.StatusOK
		if !bd.Allowed {
			status = rule.DenyStatus
		}
		h.writeForwardAuth(w, r, rule.Expose, status, bd)
		return
	}
}

// writeForwardAuth answers a decided forward-auth call with status and as
// much of bd as expose shows. Caddy and Traefik hand a refusal to the
// client as it is, so what the answer shows, an abusive client reads:
// by default the deciding limit alone, the one the RateLimit headers
// already name, so that the headers and the body tell of the same limit
// and the rule's other limits (an anti-abuse counter, say) stay unseen.
func (h *handler) writeForwardAuth(w http.ResponseWriter, r *http.Request, expose forwardauth.Expose, status int, bd *ratelimits.BatchDecision) {
	if expose == forwardauth.ExposeNone {
		// The status, and on a refusal when to come back: no limit, no
		// threshold, no count. Without a body there is no Content-Type
		// either (net/http adds none to an empty answer).
		if v, ok := headers.For(bd); ok && !bd.Allowed {
			w.Header()[headers.RetryAfter] = []string{v.RetryAfter}
		}
		w.WriteHeader(status)
		return
	}
	setRateLimitHeaders(w.Header(), bd)
	if r.Method == http.MethodHead {
		// nginx asks with HEAD to keep its connections: the body
		// would be dropped unsent, so it is not encoded either.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		return
	}
	decisions := bd.Decisions
	if expose == forwardauth.ExposeDeciding {
		// The decision the RateLimit headers are made from
		// (headers.For), or none when no limit decides the batch (every
		// one unlimited or shadow, or a source that failed open).
		decisions = nil
		if bd.Deciding >= 0 {
			decisions = bd.Decisions[bd.Deciding : bd.Deciding+1]
		}
	}
	h.writeBatchStatus(w, status, bd, decisions)
}

// forwardAuthPrefix is the path of the forward-auth calls, before the rule.
const forwardAuthPrefix = "/v1/forward-auth/"

// forwardAuthRule is the rule name of a forward-auth call's path, and
// false when the path is not one: the router's parameter, or for a method
// the router does not know (which it routes nowhere), the path's last
// segment, read the same way.
func forwardAuthRule(r *http.Request) (string, bool) {
	if name := chi.URLParam(r, "rule"); name != "" {
		return name, true
	}
	name, ok := strings.CutPrefix(routingPath(r), forwardAuthPrefix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// forwardAuthOr serves a forward-auth call whose method the router does
// not know with fa, and anything else with other, the router's answer to
// a method a path is not served with.
func forwardAuthOr(fa, other http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := forwardAuthRule(r); ok && methodLabel(r.Method) == methodOther {
			fa(w, r)
			return
		}
		other(w, r)
	}
}

// nothingCounted is the answer when a rule left every limit out: allowed,
// with the most remaining, as a batch in which nothing counts is answered.
var nothingCounted = []byte(`{"allowed":true,"remaining":` + strconv.FormatInt(math.MaxInt64, 10) + `,"retry_in_ms":0,"reset_in_ms":0,"decisions":[]}` + "\n")

// forwardAuthBatch builds the spend a rule makes of the request r
// describes: one transaction per limit whose id it finds. An id it cannot
// find is dealt with as the rule's missing action says; the error is the
// refusal of missing: deny.
func (h *handler) forwardAuthBatch(r *http.Request, rules *forwardauth.Rules, rule *forwardauth.Rule) ([]ratelimits.Transaction, *apiError) {
	q := rules.Describe(r, h.tokens.Required(accessAPI))
	cfg := h.limiter.Config()
	txns := make([]ratelimits.Transaction, 0, len(rule.Limits))
	for _, e := range rule.Limits {
		info, _ := cfg.Lookup(e.Limit) // an unknown name is the Limiter's to refuse
		id, found := q.Value(e.Source)
		byAddress := found && e.Source.Kind == forwardauth.ClientIP
		if !found {
			switch rule.Missing {
			case forwardauth.MissingAllow:
				continue
			case forwardauth.MissingClientIP:
				byAddress = q.ClientIP().IsValid()
				found = byAddress
			}
		}
		if byAddress {
			var applies bool
			if id, applies = info.Kind.AddressID(q.ClientIP()); !applies {
				continue // an IPv4 client of an IPv6 range limit
			}
		}
		if !found {
			return nil, &apiError{status: rule.DenyStatus, code: codeMissingID, transaction: -1,
				message: "the request has no " + e.Source.String() + " for limit " + e.Limit + ", and rule " + rule.Name + " refuses requests it cannot count (missing: deny)"}
		}
		txns = append(txns, ratelimits.Transaction{Limit: e.Limit, ID: id, Cost: rule.Cost})
	}
	return txns, nil
}

// forwardAuthRules returns the rules in use; none when the handler was
// given no way to find them.
func (h *handler) forwardAuthRules() *forwardauth.Rules {
	if h.forwardAuthSet == nil {
		return nil
	}
	return h.forwardAuthSet()
}

// shorten cuts s to at most n bytes, marking the cut, so that a client's
// long text is never echoed whole.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
