package ratelimits

import "context"

// A shadow limit (Limit.Shadow) never denies a batch. Its check-and-spend
// transactions become spend-only ones when resolved (they are then decided,
// and written only when themselves allowed and the batch is), and combine
// never lets a shadow decision decide the batch.
//
// A check-only transaction of a shadow limit is the one case the sources'
// batch rules cannot express: check-only ops count toward the source's own
// batch decision, so a denied one would stop the batch's other writes. In a
// batch where something may be written, such transactions are therefore
// decided in a source call of their own, before the rest; being check-only
// they write nothing, so only the instant they are read at can differ.

// shadowCheck reports whether p is a check-only transaction of a shadow
// limit.
func (p *preparedTxn) shadowCheck() bool {
	return !p.unlimited && p.limit.Shadow && p.mode == CheckOnly
}

// firstShadowCheck returns the index of the batch's first shadow check.
func (b *batch) firstShadowCheck() (int, bool) {
	for i := range b.prepared {
		if b.prepared[i].shadowCheck() {
			return i, true
		}
	}
	return 0, false
}

// hasShadowCheck reports whether the batch has a shadow check beside a
// transaction that may write (any limited one not check-only), the batch
// that must be decided in two parts.
func (b *batch) hasShadowCheck() bool {
	if _, ok := b.firstShadowCheck(); !ok {
		return false
	}
	for i := range b.prepared {
		if p := &b.prepared[i]; !p.unlimited && p.mode != CheckOnly {
			return true
		}
	}
	return false
}

// spendShadowChecksApart decides the shadow checks of b in one batch and
// the rest in another, and answers as if they had been one.
func (l *Limiter) spendShadowChecksApart(ctx context.Context, b *batch) (*BatchDecision, error) {
	var checks, rest []int
	for i := range b.prepared {
		if b.prepared[i].shadowCheck() {
			checks = append(checks, i)
		} else {
			rest = append(rest, i)
		}
	}
	for _, part := range [][]int{checks, rest} {
		sub, err := newBatch(len(part))
		if err != nil {
			return nil, err
		}
		for j, i := range part {
			sub.prepared[j] = b.prepared[i]
		}
		bd, err := l.spend(ctx, sub)
		if err != nil {
			return nil, err
		}
		for j, i := range part {
			b.bd.Decisions[i] = bd.Decisions[j]
		}
	}
	combine(&b.bd, b.prepared)
	return &b.bd, nil
}
