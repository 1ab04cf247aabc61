package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
)

// maxCursor bounds the cursor a client sends back: the sources' cursors
// are far shorter (a position, or a scan position and one id), and a
// longer one is not theirs.
const maxCursor = 1024

// codeNotImplemented is the error code of a listing the source cannot make.
const codeNotImplemented = "not_implemented"

// listBoxes serves GET /v1/admin/boxes?limit=NAME[&cursor=C]: one page of
// at most ratelimits.MaxBoxPage entries of the limit's penalty box, and
// the cursor of the next. A page copies its entries out of the store a
// page at a time, so a large box is read without holding anything long.
func (h *handler) listBoxes(w http.ResponseWriter, r *http.Request) {
	q, e := queryParams(r, "limit", "cursor")
	if e != nil {
		writeError(w, e)
		return
	}
	limit, ok := q["limit"]
	if !ok || limit == "" {
		writeError(w, badRequest(codeInvalidArgument, "query parameter limit is required: the limit whose penalty box to list", -1))
		return
	}
	cursor := q["cursor"]
	if len(cursor) > maxCursor {
		writeError(w, badRequest(codeInvalidArgument, "the cursor is not one this listing gave (too long)", -1))
		return
	}
	if _, ok := q["cursor"]; ok && cursor == "" {
		writeError(w, badRequest(codeInvalidArgument, "the cursor is empty; leave it out for the first page", -1))
		return
	}
	page, err := h.limiter.ListBox(r.Context(), limit, cursor, ratelimits.MaxBoxPage)
	if err != nil {
		h.boxListFailure(w, r, err)
		return
	}
	out := wire.BoxesResponse{Limit: limit, Local: page.Local, Entries: make([]wire.BoxEntry, len(page.Entries)), NextCursor: page.Next}
	for i, en := range page.Entries {
		left := en.Expires - page.Now
		out.Entries[i] = wire.BoxEntry{
			ID:          en.ID,
			ExpiresAt:   time.Unix(0, en.Expires).UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			ExpiresInMS: (left + int64(time.Millisecond) - 1) / int64(time.Millisecond),
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// boxListFailure answers a failed listing: the client's mistakes as the
// other endpoints answer them, a source that cannot list as 501, and a
// failed read as 503 (a listing writes nothing, so nothing is unknown
// about its outcome).
func (h *handler) boxListFailure(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ratelimits.ErrNoBoxListing):
		writeError(w, &apiError{status: http.StatusNotImplemented, code: codeNotImplemented, transaction: -1,
			message: "this source cannot list penalty boxes"})
	case errors.Is(err, ratelimits.ErrSourceUnavailable):
		h.limiterFailureAs(w, r, err, func(e *apiError) {
			e.code = codeUnavailable
			e.message = "the store could not be read: nothing was listed, and the request can be retried"
		})
	default:
		h.limiterFailure(w, r, err)
	}
}
