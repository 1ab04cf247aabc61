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
