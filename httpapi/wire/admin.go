package wire

// TopResponse answers GET /v1/admin/top: the ids denied most over the
// window, most first. Limit is the limit asked for, absent when the list
// spans every limit; each entry then names its own.
type TopResponse struct {
	Limit   string     `json:"limit,omitempty"`
	WindowS int        `json:"window_s"`
	IDs     []TopEntry `json:"ids"`
}

// TopEntry is one denied id. Denied never under-counts its denials in the
// window, and Denied − Error never over-counts them.
type TopEntry struct {
	Limit  string `json:"limit,omitempty"`
	ID     string `json:"id"`
	Denied uint64 `json:"denied"`
	Error  uint64 `json:"error"`
}

// BoxesResponse answers GET /v1/admin/boxes: one page of the entries in a
// limit's penalty box, in no particular order, and the cursor of the next
// page (absent on the last). Local says the entries are this process's
// (a limit whose sync_rate is not 0 on a shared source): another process
// may hold others.
type BoxesResponse struct {
	Limit      string     `json:"limit"`
	Local      bool       `json:"local"`
	Entries    []BoxEntry `json:"entries"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// BoxEntry is an id in the box: when it leaves (RFC 3339 with
// milliseconds, on the service's clock) and the time left until then.
type BoxEntry struct {
	ID          string `json:"id"`
	ExpiresAt   string `json:"expires_at"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

// ReloadStatusResponse answers GET /v1/admin/reload: the last attempt to
// load the configuration files (startup, a signal, the admin endpoint, a
// file change), and what is in use since the last one that succeeded.
type ReloadStatusResponse struct {
	LastAttempt ReloadAttempt `json:"last_attempt"`
	InUse       ReloadAttempt `json:"in_use"`
}

// ReloadAttempt is one load of the files: when (RFC 3339, the wall
// clock), what asked for it, whether it went into use, every problem when
// it did not, and the files it read with what each gave.
type ReloadAttempt struct {
	At       string       `json:"at"`
	Trigger  string       `json:"trigger"`
	OK       bool         `json:"ok"`
	Problems []string     `json:"problems,omitempty"`
	Files    []ReloadFile `json:"files,omitempty"`
}

// ReloadFile is one configuration file of a load: its role (the flag
// that names it), its path as configured, and what it gave (limits with a
// default, override ids, descriptor rules, forward-auth rules), or "none"
// when it was absent.
type ReloadFile struct {
	File    string `json:"file"`
	Path    string `json:"path"`
	Entries string `json:"entries"`
}
