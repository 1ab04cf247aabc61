package httpapi

import (
	"net/http"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// codeSyncFailed is the error code of a sync whose push failed.
const codeSyncFailed = "sync_failed"

// syncNow serves POST /v1/admin/sync: one sync cycle of every limit whose
// sync_rate is above 0, run now; the answer comes once it is done. A
// failed push is a 503: its hits are kept in the process and pushed again
// by the next cycle, so nothing is lost and the call may be repeated.
func (h *handler) syncNow(w http.ResponseWriter, r *http.Request) {
	var pushed, fetched int
	var err error
	if h.sync != nil {
		pushed, fetched, err = h.sync(r.Context())
	}
	if err != nil {
		if clientGone(r, err) {
			h.clientCancelled(w, r, err)
			return
		}
		// Not a source error of the metrics, which counts refused
		// decisions; limiter_sync_failures_total counts this.
		h.log.Error("sync failed", "route", h.routes.label(r), "err", err)
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: codeSyncFailed, transaction: -1,
			message: "the sync with the source failed: " + err.Error() +
				"; the hits not pushed are kept in this process and pushed again by the next cycle"})
		return
	}
	writeJSON(w, http.StatusOK, wire.SyncResponse{Pushed: pushed, Fetched: fetched})
}
