package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// The operator's reads: who is being limited (TopDenied, Boxes) and which
// configuration is in use (ReloadStatus). Each is an admin call, sent
// with the admin token, and safe to repeat.

// TopDenied is the answer of Client.TopDenied: the ids whose spends were
// denied most over the window, most first.
type TopDenied struct {
	// Limit is the limit asked for, "" when the list spans every limit
	// (each entry then names its own).
	Limit  string
	Window time.Duration
	IDs    []DeniedID
}

// DeniedID is one id of a TopDenied list. Denied never under-counts the
// id's denials in the window, and Denied − Error never over-counts them:
// the service counts with a bounded sketch, and Error is its bound.
type DeniedID struct {
	Limit  string
	ID     string
	Denied uint64
	Error  uint64
}

// ErrTopWindow refuses a TopDenied window the service does not keep.
var ErrTopWindow = errors.New("limiter: the top denied ids are kept over 5m or 1h only")

// TopDenied lists the ids whose spends of limit were denied most over the
// last window, most first, at most 100 of them; limit "" lists those of
// every limit. The service keeps two windows: 5 minutes (also window 0)
// and an hour; any other window is ErrTopWindow, and nothing is sent. An
// unknown limit is an *Error with CodeUnknownLimit.
func (c *Client) TopDenied(ctx context.Context, limit string, window time.Duration) (TopDenied, error) {
	q := url.Values{}
	if limit != "" {
		q.Set("limit", limit)
	}
	switch window {
	case 0:
	case 5 * time.Minute:
		q.Set("window", "5m")
	case time.Hour:
		q.Set("window", "1h")
	default:
		return TopDenied{}, ErrTopWindow
	}
	r := request{method: http.MethodGet, path: withQuery("/v1/admin/top", q), admin: true, safety: repeatable}
	var v topJSON
	if err := c.call(ctx, r, nil, &v); err != nil {
		return TopDenied{}, err
	}
	out := TopDenied{Limit: v.Limit, Window: time.Duration(v.WindowS) * time.Second, IDs: make([]DeniedID, len(v.IDs))}
	for i, e := range v.IDs {
		out.IDs[i] = DeniedID(e)
	}
	return out, nil
}

// BoxPage is one page of Client.Boxes.
type BoxPage struct {
	Limit string
	// Local says the entries are the answering process's own: the limit
	// keeps its counts in each process (its sync_rate is not 0) on a
	// shared source, and another process may hold other entries.
	Local   bool
	Entries []BoxEntry
	// NextCursor asks for the next page; "" on the last one.
	NextCursor string
}

// BoxEntry is an id in a penalty box: when it leaves, on the service's
// clock, and the time left until then when the service answered.
type BoxEntry struct {
	ID        string
	ExpiresAt time.Time
	ExpiresIn time.Duration
}

// Boxes reads one page of the ids in the penalty box of limit: the first
// page with cursor "", the next with the page's NextCursor, until a page
// has none. A page may hold no entry and still have a next one. Every id
// in the box from the first page to the last is listed at least once; an
// id boxed or let out meanwhile may be listed or not, and one may appear
// twice. A limit without a penalty box, or a cursor the listing did not
// give, is an *Error with CodeInvalidArgument.
func (c *Client) Boxes(ctx context.Context, limit, cursor string) (BoxPage, error) {
	q := url.Values{"limit": {limit}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	r := request{method: http.MethodGet, path: withQuery("/v1/admin/boxes", q), admin: true, safety: repeatable}
	var v boxesJSON
	if err := c.call(ctx, r, nil, &v); err != nil {
		return BoxPage{}, err
	}
	out := BoxPage{Limit: v.Limit, Local: v.Local, NextCursor: v.NextCursor, Entries: make([]BoxEntry, len(v.Entries))}
	for i, e := range v.Entries {
		at, err := time.Parse(time.RFC3339Nano, e.ExpiresAt)
		if err != nil {
			return BoxPage{}, decodeError(r, err)
		}
		out.Entries[i] = BoxEntry{ID: e.ID, ExpiresAt: at, ExpiresIn: time.Duration(e.ExpiresInMS) * time.Millisecond}
	}
	return out, nil
}

// ReloadStatus is the answer of Client.ReloadStatus.
type ReloadStatus struct {
	// LastAttempt is the last load of the configuration files: at
	// startup, on a signal, by Reload, or on a file change.
	LastAttempt ReloadAttempt
	// InUse is the last load that succeeded, whose configuration the
	// service runs.
	InUse ReloadAttempt
}

// ReloadAttempt is one load of the configuration files.
type ReloadAttempt struct {
	// At is when it ran, on the service's wall clock.
	At time.Time
	// Trigger is what asked for it: "startup", "SIGHUP", "admin
	// endpoint" or "file change".
	Trigger string
	OK      bool
	// Problems are a failed load's problems, FILE:LINE first; the
	// service keeps at most 50 lines, the last saying how many more the
	// log has when there were more.
	Problems []string
	// Files are the files a successful load read.
	Files []ReloadFile
}

// ReloadFile is one configuration file of a load: its role (the flag
// that names it, such as "defaults"), its path as configured, and what
// it gave (the count of limits, override ids, descriptor or forward-auth
// rules), or "none" when it was absent.
type ReloadFile struct {
	File    string
	Path    string
	Entries string
}

// ReloadStatus reads the last attempt to load the configuration files
// and the load in use.
func (c *Client) ReloadStatus(ctx context.Context) (ReloadStatus, error) {
	r := request{method: http.MethodGet, path: "/v1/admin/reload", admin: true, safety: repeatable}
	var v reloadStatusJSON
	if err := c.call(ctx, r, nil, &v); err != nil {
		return ReloadStatus{}, err
	}
	last, err := v.LastAttempt.attempt()
	if err != nil {
		return ReloadStatus{}, decodeError(r, err)
	}
	inUse, err := v.InUse.attempt()
	if err != nil {
		return ReloadStatus{}, decodeError(r, err)
	}
	return ReloadStatus{LastAttempt: last, InUse: inUse}, nil
}

// withQuery is path with q encoded after it.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// The admin reads' bodies, as the service sends them.

type topJSON struct {
	Limit   string         `json:"limit"`
	WindowS int64          `json:"window_s"`
	IDs     []topEntryJSON `json:"ids"`
}

type topEntryJSON struct {
	Limit  string `json:"limit"`
	ID     string `json:"id"`
	Denied uint64 `json:"denied"`
	Error  uint64 `json:"error"`
}

type boxesJSON struct {
	Limit      string         `json:"limit"`
	Local      bool           `json:"local"`
	Entries    []boxEntryJSON `json:"entries"`
	NextCursor string         `json:"next_cursor"`
}

type boxEntryJSON struct {
	ID          string `json:"id"`
	ExpiresAt   string `json:"expires_at"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

type reloadStatusJSON struct {
	LastAttempt reloadAttemptJSON `json:"last_attempt"`
	InUse       reloadAttemptJSON `json:"in_use"`
}

type reloadAttemptJSON struct {
	At       string           `json:"at"`
	Trigger  string           `json:"trigger"`
	OK       bool             `json:"ok"`
	Problems []string         `json:"problems"`
	Files    []reloadFileJSON `json:"files"`
}

type reloadFileJSON struct {
	File    string `json:"file"`
	Path    string `json:"path"`
	Entries string `json:"entries"`
}

// attempt is a's ReloadAttempt.
func (a reloadAttemptJSON) attempt() (ReloadAttempt, error) {
	at, err := time.Parse(time.RFC3339Nano, a.At)
	if err != nil {
		return ReloadAttempt{}, err
	}
	out := ReloadAttempt{At: at, Trigger: a.Trigger, OK: a.OK, Problems: a.Problems}
	for _, f := range a.Files {
		out.Files = append(out.Files, ReloadFile(f))
	}
	return out, nil
}
