package ratelimits

import (
	"testing"
	"time"
)

// TestFingerprint: the fingerprint tells apart every change of a resolved
// limit that could change a decision (algorithm, numbers, sync_rate, an
// override instead of the default), and the GCRA form is pinned, so that
// records made by an earlier version still match a retry.
func TestFingerprint(t *testing.T) {
	gcra := mustLimit(t, 5, 3, time.Minute)
	txn := func(l Limit) []preparedTxn {
		return []preparedTxn{{info: NameInfo{Name: 120}, bucketID: "alice", cost: 2, mode: CheckAndSpend, limit: l}}
	}
	overridden := gcra
	overridden.Override = true
	pinned := []preparedTxn{
		{info: NameInfo{Name: 101}, bucketID: "alice", cost: 2, mode: CheckAndSpend, limit: gcra},
		{info: NameInfo{Name: 3}, bucketID: "42", cost: 0, mode: SpendOnly, limit: overridden},
		{info: NameInfo{Name: 102}, bucketID: "x", cost: 1, mode: CheckOnly, unlimited: true},
	}
	if got := fingerprint(opSpend, pinned); got != "2f8e3794bae9688ca99137dbac93170e" {
		t.Errorf("the GCRA fingerprint changed: %s", got)
	}
	if got := fingerprint(opRefund, pinned); got != "ed5836b6213bf388a1cdca383b29ed4b" {
		t.Errorf("the GCRA fingerprint of a refund changed: %s", got)
	}

	sliding := mustWindow(t, SlidingWindow, 3, time.Minute)
	variants := map[string]Limit{
		"gcra":           gcra,
		"sliding":        sliding,
		"fixed":          mustWindow(t, FixedWindow, 3, time.Minute),
		"sliding count":  mustWindow(t, SlidingWindow, 4, time.Minute),
		"sliding period": mustWindow(t, SlidingWindow, 3, time.Hour),
	}
	syncing := sliding
	syncing.SyncRate = time.Second
	variants["sliding sync_rate"] = syncing
	override := sliding
	override.Override = true
	variants["sliding override"] = override
	seen := map[string]string{}
	for name, l := range variants {
		fp := fingerprint(opSpend, txn(l))
		if other, dup := seen[fp]; dup {
			t.Errorf("%s and %s have the same fingerprint", name, other)
		}
		seen[fp] = name
	}
}
