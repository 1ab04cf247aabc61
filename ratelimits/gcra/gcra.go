// Package gcra holds the Generic Cell Rate Algorithm as pure functions on
// int64 nanoseconds, and the batch rules built on them.
//
// Nothing here does I/O, reads a clock or allocates: every storage source
// (memory shards, a Redis script) and every test computes a decision with these
// functions, so the same inputs give the same answer to the nanosecond
// wherever a bucket lives. docs/semantics.md states the rules they follow.
package gcra

import "math"

// Missing is the TAT of a bucket that is not stored. It is earlier than any
// real time, so both Spend and Refund treat it as a full bucket without a
// separate flag, and a source can hand every bucket over as one int64.
const Missing int64 = math.MinInt64

// Decision is the outcome of one GCRA computation for one bucket.
//
// All durations are nanoseconds. NewTAT is the Theoretical Arrival Time the
// bucket would hold after the operation; whether it is stored is up to the
// caller (a check never stores, a denied spend leaves the TAT unchanged).
type Decision struct {
	Allowed   bool
	Remaining int64
	RetryIn   int64
	ResetIn   int64
	NewTAT    int64
}

// Spend decides whether cost tokens can be taken from a bucket at now.
//
// tat is the stored Theoretical Arrival Time, or Missing for a bucket that is
// not stored (a bucket whose TAT has passed is full, which is the same thing).
// emissionInterval is the time one token takes to come back and burstOffset
// the time an empty bucket takes to fill (emissionInterval * burst). The
// caller guarantees 0 <= cost <= burst and emissionInterval > 0.
//
// When denied, NewTAT equals the TAT the bucket effectively has
// (max(now, tat)), so storing it would change nothing.
func Spend(now, tat, emissionInterval, burstOffset, cost int64) Decision {
	t := max(now, tat)
	increment := emissionInterval * cost
	// diff is how far the bucket stays from overflowing after this spend,
	// now - (newTAT - burstOffset): negative means the spend would need
	// tokens that have not come back yet. Written so that no term can
	// overflow (increment <= burstOffset, t >= now), it is exact also
	// where newTAT = t + increment is past the largest int64.
	ahead, beyond := aheadOf(t, now)
	diff := burstOffset - increment - ahead
	// A spend whose new TAT would not fit in an int64 (a burst offset of
	// centuries, longer than the time left to the end of int64 time) is
	// denied too: the bucket could not hold it, and a TAT clamped short
	// of it would let the next spends through.
	past := t > math.MaxInt64-increment
	// A TAT further ahead than the largest int64 (ahead saturated) is
	// denied whatever diff reads: the true diff is below it, and negative
	// even where burstOffset - increment is the largest int64.
	if diff < 0 || past || beyond {
		remaining := (burstOffset - ahead) / emissionInterval // now - (t - burstOffset)
		retryIn := -diff
		if past {
			// Never: t only grows, so t + increment stays past the
			// largest int64. The wait answered is to the end of int64
			// time, so that a client that waits is never early.
			retryIn = math.MaxInt64 - now
		}
		return Decision{
			Allowed:   false,
			Remaining: max(remaining, 0),
			RetryIn:   max(retryIn, 1),
			ResetIn:   ahead,
			NewTAT:    t,
		}
	}
	var retryIn int64
	if diff < increment {
		// Allowed, but the next token of the same size is not there yet.
		retryIn = increment - diff
	}
	return Decision{
		Allowed:   true,
		Remaining: diff / emissionInterval,
		RetryIn:   retryIn,
		ResetIn:   ahead + increment, // <= burstOffset
		NewTAT:    t + increment,     // fits: past is false
	}
}

// Refund gives cost tokens back to a bucket at now.
//
// A missing bucket (tat == Missing), or one whose TAT is before now, is
// already full: the answer is "nothing given back" with a full bucket, and
// nothing is to be written. Otherwise the TAT moves back by cost emission intervals, never past
// now, so a refund can never make a bucket more than full. Allowed reports
// whether anything was actually given back.
func Refund(now, tat, emissionInterval, burstOffset, cost int64) Decision {
	if now > tat {
		return Decision{
			Allowed:   false,
			Remaining: burstOffset / emissionInterval,
			NewTAT:    now,
		}
	}
	// newTAT = max(tat - increment, now), and newAhead = newTAT - now,
	// written so that neither overflows (see aheadOf).
	increment := emissionInterval * cost
	ahead, beyond := aheadOf(tat, now)
	newTAT, newAhead := now, int64(0)
	switch {
	case beyond:
		// tat - now is past the largest int64, so more than increment:
		// tat - increment is after now, and the difference may still
		// not fit.
		newTAT = tat - increment
		newAhead, _ = aheadOf(newTAT, now)
	case ahead > increment:
		newTAT, newAhead = tat-increment, ahead-increment
	}
	return Decision{
		Allowed:   newTAT != tat,
		Remaining: max((burstOffset-newAhead)/emissionInterval, 0), // now - (newTAT - burstOffset)
		ResetIn:   newAhead,
		NewTAT:    newTAT,
	}
}

// aheadOf is t - now for t >= now, or the largest int64 and beyond true
// where that difference does not fit in one: a TAT written centuries
// after a clock that was then set far back (a fake clock moved from 2262
// to 1700), read at now. Every figure of a decision is computed from it
// rather than from now and t apart, so that none overflows; beyond, the
// bucket reads as empty and a spend is denied, as the exact comparison of
// the Redis script denies it.
func aheadOf(t, now int64) (ahead int64, beyond bool) {
	if d := t - now; d >= 0 {
		return d, false
	}
	return math.MaxInt64, true
}
