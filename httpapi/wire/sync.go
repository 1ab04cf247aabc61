package wire

// SyncResponse answers a successful POST /v1/admin/sync: how many
// (limit, id) counters had hits pushed to the source, and how many had
// their totals read back from it. Both are 0 when no limit syncs (or the
// source is not shared).
type SyncResponse struct {
	Pushed  int `json:"pushed"`
	Fetched int `json:"fetched"`
}
