package gcra

// Mode says how a transaction takes part in a batch.
type Mode uint8

const (
	// CheckAndSpend counts toward the batch decision and is written when the
	// whole batch is allowed. It is the default.
	CheckAndSpend Mode = iota
	// CheckOnly counts toward the batch decision and is never written.
	CheckOnly
	// SpendOnly does not count toward the batch decision; it is written only
	// when it is itself allowed and the whole batch is allowed.
	SpendOnly
)

// String returns the mode's name as it appears in the HTTP API.
func (m Mode) String() string {
	switch m {
	case CheckAndSpend:
		return "check-and-spend"
	case CheckOnly:
		return "check-only"
	case SpendOnly:
		return "spend-only"
	}
	return "unknown"
}

// Counts reports whether a transaction in this mode takes part in the batch
// decision.
func (m Mode) Counts() bool { return m != SpendOnly }

// Op is one bucket's part in a batch, as a source sees it: the key it is
// stored under, its limit reduced to the two numbers GCRA needs, the cost and
// the mode. A source needs nothing else to decide and store a batch.
type Op struct {
	Key              string
	EmissionInterval int64
	BurstOffset      int64
	Cost             int64
	Mode             Mode
}

// Outcome is one Op's decision in a batch and whether its NewTAT must be
// stored. A stored NewTAT that is not after now describes a full bucket, so a
// source may delete the bucket instead of storing it.
type Outcome struct {
	Decision
	Write bool
}

// SpendBatch decides a batch of spends at now, given each op's stored TAT
// (Missing when not stored), and fills outcomes (len(ops), same order).
//
// The batch is allowed when every counting op is allowed; a denied batch
// writes nothing at all. In an allowed batch, CheckAndSpend and SpendOnly ops
// that are themselves allowed and actually move their TAT are written.
// SpendBatch returns whether the batch was allowed.
func SpendBatch(now int64, ops []Op, tats []int64, outcomes []Outcome) bool {
	allowed := true
	for i, op := range ops {
		d := Spend(now, tats[i], op.EmissionInterval, op.BurstOffset, op.Cost)
		outcomes[i] = Outcome{Decision: d}
		if op.Mode.Counts() && !d.Allowed {
			allowed = false
		}
	}
	if !allowed {
		return false
	}
	for i, op := range ops {
		o := &outcomes[i]
		// A cost-0 spend leaves NewTAT at max(now, tat): nothing to store.
		o.Write = op.Mode != CheckOnly && o.Allowed && o.NewTAT > max(now, tats[i])
	}
	return true
}

// RefundBatch gives back each op's cost at now, given each op's stored TAT
// (Missing when not stored), and fills outcomes (len(ops), same order).
// CheckOnly ops refund nothing. An op is written only when something was
// actually given back.
func RefundBatch(now int64, ops []Op, tats []int64, outcomes []Outcome) {
	for i, op := range ops {
		cost := op.Cost
		if op.Mode == CheckOnly {
			cost = 0
		}
		d := Refund(now, tats[i], op.EmissionInterval, op.BurstOffset, cost)
		outcomes[i] = Outcome{Decision: d, Write: d.Allowed}
	}
}
