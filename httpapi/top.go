package httpapi

import (
	"net/http"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/topdenied"
)

// codeTopUnavailable is the error code of a top list the fleet's store
// could not give.
const codeTopUnavailable = "top_unavailable"

// topDenied serves GET /v1/admin/top?limit=NAME&window=5m|1h: the ids
// denied most over the window, of one limit or (without limit) of all.
func (h *handler) topDenied(w http.ResponseWriter, r *http.Request) {
	q, e := queryParams(r, "limit", "window")
	if e != nil {
		writeError(w, e)
		return
	}
	window := topdenied.Window5m
	if v, ok := q["window"]; ok {
		if window, ok = topdenied.ParseWindow(v); !ok {
			writeError(w, badRequest(codeInvalidArgument, "window "+quoteShort(v)+": want 5m or 1h", -1))
			return
		}
	}
	limit, named := q["limit"]
	if named {
		if _, ok := h.limiter.Config().Lookup(limit); !ok {
			writeError(w, badRequest(codeUnknownLimit, "unknown limit "+quoteShort(limit), -1))
			return
		}
	}
	entries, err := h.top.Top(r.Context(), limit, window)
	if err != nil {
		if clientGone(r, err) {
			h.clientCancelled(w, r, err)
			return
		}
		// Not a source error of the metrics: that counts refused
		// decisions, which the critical alert is about.
		h.log.Error("top denied ids: the store failed", "route", h.routes.label(r), "err", err)
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: codeTopUnavailable, transaction: -1,
			message: "the other processes' counts could not be read: " + err.Error()})
		return
	}
	out := wire.TopResponse{Limit: limit, WindowS: window.Seconds(), IDs: make([]wire.TopEntry, len(entries))}
	for i, en := range entries {
		out.IDs[i] = wire.TopEntry{ID: en.ID, Denied: en.Denied, Error: en.Error}
		if !named {
			out.IDs[i].Limit = en.Limit
		}
	}
	writeJSON(w, http.StatusOK, out)
}
