package concurrency

import (
	"math/rand/v2"
	"slices"
	"testing"
)

const now = 1_000_000

// figures is what a Decision says, without its leases.
type figures struct {
	Allowed                     bool
	Remaining, RetryIn, ResetIn int64
}

func fig(d Decision) figures { return figures{d.Allowed, d.Remaining, d.RetryIn, d.ResetIn} }

func leases(ls ...Lease) []Lease { return ls }

func TestAcquire(t *testing.T) {
	l := Limit{Count: 3, TTL: 600_000}
	tests := []struct {
		name   string
		cost   int64
		bucket []Lease
		want   figures // Leases and Lease checked apart
		leased bool
	}{
		{
			name:   "empty bucket",
			cost:   1,
			want:   figures{Allowed: true, Remaining: 2, ResetIn: 600_000},
			leased: true,
		},
		{
			name:   "fills the last slot: retry when the earliest lease ends",
			cost:   1,
			bucket: leases(Lease{"a", 1, now + 100}, Lease{"b", 1, now + 50}),
			want:   figures{Allowed: true, Remaining: 0, RetryIn: 50, ResetIn: 600_000},
			leased: true,
		},
		{
			name:   "denied: waits for enough leases to end",
			cost:   2,
			bucket: leases(Lease{"a", 1, now + 100}, Lease{"b", 1, now + 50}, Lease{"c", 1, now + 70}),
			want:   figures{Allowed: false, Remaining: 0, RetryIn: 70, ResetIn: 100},
		},
		{
			name:   "expired leases count for nothing",
			cost:   3,
			bucket: leases(Lease{"a", 2, now}, Lease{"b", 1, now - 5}),
			want:   figures{Allowed: true, Remaining: 0, RetryIn: 600_000, ResetIn: 600_000},
			leased: true,
		},
		{
			name:   "cost 0 reads: no lease",
			cost:   0,
			bucket: leases(Lease{"a", 2, now + 10}),
			want:   figures{Allowed: true, Remaining: 1, ResetIn: 10},
		},
		{
			name: "cost 0 on an empty bucket",
			cost: 0,
			want: figures{Allowed: true, Remaining: 3},
		},
		{
			name:   "over the count after a lowered override: cost 0 is denied",
			cost:   0,
			bucket: leases(Lease{"a", 2, now + 10}, Lease{"b", 2, now + 20}),
			want:   figures{Allowed: false, Remaining: 0, RetryIn: 10, ResetIn: 20},
		},
		{
			name:   "leases ending together",
			cost:   2,
			bucket: leases(Lease{"a", 1, now + 30}, Lease{"b", 1, now + 30}, Lease{"c", 1, now + 90}),
			want:   figures{Allowed: false, Remaining: 0, RetryIn: 30, ResetIn: 90},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Acquire(now, l, tt.cost, "new", slices.Clone(tt.bucket))
			leases := got.Leases
			lease := got.Lease
			if fig(got) != tt.want {
				t.Errorf("Acquire = %+v, want %+v", got, tt.want)
			}
			wantLease := Lease{}
			if tt.leased {
				wantLease = Lease{ID: "new", Cost: tt.cost, Exp: now + l.TTL}
			}
			if lease != wantLease {
				t.Errorf("lease = %+v, want %+v", lease, wantLease)
			}
			if tt.leased != slices.Contains(leases, wantLease) {
				t.Errorf("leases after = %+v: new lease there is %v, want %v", leases, !tt.leased, tt.leased)
			}
			for _, x := range leases {
				if x.Exp <= now {
					t.Errorf("leases after = %+v: holds an expired lease", leases)
				}
			}
		})
	}
}

func TestReleaseAndRenew(t *testing.T) {
	l := Limit{Count: 3, TTL: 1000}
	bucket := func() []Lease {
		return leases(Lease{"a", 1, now + 100}, Lease{"b", 2, now + 50}, Lease{"gone", 1, now})
	}
	tests := []struct {
		name string
		op   func(int64, Limit, string, []Lease) Decision
		id   string
		want figures
		left []Lease
	}{
		{"release a live lease", Release, "b", figures{Allowed: true, Remaining: 2, ResetIn: 100}, leases(Lease{"a", 1, now + 100})},
		{"release an unknown lease", Release, "zz", figures{Allowed: false, Remaining: 0, ResetIn: 100}, leases(Lease{"a", 1, now + 100}, Lease{"b", 2, now + 50})},
		{"release an expired lease", Release, "gone", figures{Allowed: false, Remaining: 0, ResetIn: 100}, leases(Lease{"a", 1, now + 100}, Lease{"b", 2, now + 50})},
		{"renew a live lease", Renew, "b", figures{Allowed: true, Remaining: 0, ResetIn: 1000}, leases(Lease{"a", 1, now + 100}, Lease{"b", 2, now + 1000})},
		{"renew an expired lease", Renew, "gone", figures{Allowed: false, Remaining: 0, ResetIn: 100}, leases(Lease{"a", 1, now + 100}, Lease{"b", 2, now + 50})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.op(now, l, tt.id, bucket())
			left := got.Leases
			if fig(got) != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if !slices.Equal(left, tt.left) {
				t.Errorf("leases after = %+v, want %+v", left, tt.left)
			}
		})
	}
}

// bruteRetryIn is the least d >= 0 at which, with no release and no
// renewal, the leases still live leave room for cost: found by trying
// every d up to the latest expiry.
func bruteRetryIn(nowMs, count, cost int64, b []Lease) int64 {
	for d := int64(0); ; d++ {
		var u int64
		for _, l := range b {
			if nowMs+d < l.Exp {
				u += l.Cost
			}
		}
		if u+cost <= count {
			return d
		}
	}
}

// TestAcquireAgainstBruteForce checks every figure of random acquires
// against the rules computed the slow way.
func TestAcquireAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		l := Limit{Count: 1 + rng.Int64N(8), TTL: 1 + rng.Int64N(200)}
		var b []Lease
		for i := range rng.IntN(8) {
			b = append(b, Lease{ID: string(rune('a' + i)), Cost: 1 + rng.Int64N(3), Exp: now - 20 + rng.Int64N(220)})
		}
		cost := rng.Int64N(l.Count + 1)
		var live []Lease
		var u, latest int64
		for _, x := range b {
			if now < x.Exp {
				live = append(live, x)
				u += x.Cost
				latest = max(latest, x.Exp)
			}
		}
		got := Acquire(now, l, cost, "new", slices.Clone(b))
		allowed := u+cost <= l.Count
		if got.Allowed != allowed {
			t.Fatalf("bucket %+v, limit %+v, cost %d: Allowed %v, want %v", b, l, cost, got.Allowed, allowed)
		}
		after := live
		if allowed && cost > 0 {
			after = append(slices.Clone(live), Lease{"new", cost, now + l.TTL})
			u += cost
			latest = max(latest, now+l.TTL)
		}
		want := figures{Allowed: allowed, Remaining: max(0, l.Count-u)}
		if allowed {
			if want.Remaining < cost {
				want.RetryIn = bruteRetryIn(now, l.Count, cost, after)
			}
		} else {
			want.RetryIn = max(1, bruteRetryIn(now, l.Count, cost, live))
		}
		if latest > 0 {
			want.ResetIn = latest - now
		}
		if fig(got) != want {
			t.Fatalf("bucket %+v, limit %+v, cost %d: got %+v, want %+v", b, l, cost, got, want)
		}
	}
}

func TestBusyAndExpires(t *testing.T) {
	b := leases(Lease{"a", 1, now}, Lease{"b", 1, now + 5})
	if !Busy(now, b) || Busy(now+5, b) {
		t.Errorf("Busy: a lease live until now+5 is live at now and not at now+5")
	}
	if got := Expires(b); got != now+5 {
		t.Errorf("Expires = %d, want %d", got, now+5)
	}
	if got := Expires(nil); got != 0 {
		t.Errorf("Expires(nil) = %d, want 0", got)
	}
}

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !ValidID(id) {
			t.Fatalf("NewID() = %q: not a valid id", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
	for _, s := range []string{"", "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdeF", "0123456789abcdef0123456789abcdeg", "0123456789abcdef0123456789abcdef0"} {
		if ValidID(s) {
			t.Errorf("ValidID(%q) = true", s)
		}
	}
}

func TestAcquireAllocatesNothingWhenRoomIsLeft(t *testing.T) {
	l := Limit{Count: 10, TTL: 1000}
	b := make([]Lease, 0, 4)
	b = append(b, Lease{"a", 1, now + 10})
	allocs := testing.AllocsPerRun(100, func() {
		d := Acquire(now, l, 1, "new", b)
		b = d.Leases[:1]
	})
	if allocs != 0 {
		t.Errorf("Acquire allocated %v times per call, want 0", allocs)
	}
}
