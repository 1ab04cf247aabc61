package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/memory"
)

// stalledSource answers every call as a source that is still working when
// its context ends: with the context's error.
type stalledSource struct{ *memory.Source }

func (stalledSource) Spend(ctx context.Context, _ int64, _ []bucket.Op, _ []bucket.Outcome) error {
	<-ctx.Done()
	return fmt.Errorf("spend: %w", ctx.Err())
}

// A source call abandoned because its caller cancelled is not a source
// error; one that ran out of its deadline is.
func TestSourceErrorsLeaveOutCancelledCalls(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		counted float64
	}{
		{"caller cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, 0},
		{"deadline passed", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 0)
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			src := observeSource(stalledSource{memory.New(0)}, reg)
			ctx, cancel := tt.ctx()
			defer cancel()
			if err := src.Spend(ctx, 0, nil, nil); err == nil {
				t.Fatal("a stalled spend succeeded")
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := -1.0
			for _, f := range families {
				if f.GetName() != "limiter_source_operation_errors_total" {
					continue
				}
				for _, m := range f.GetMetric() {
					if m.GetLabel()[0].GetValue() == "spend" {
						got = m.GetCounter().GetValue()
					}
				}
			}
			if got != tt.counted {
				t.Errorf(`limiter_source_operation_errors_total{op="spend"} = %v, want %v`, got, tt.counted)
			}
		})
	}
}

// A call the source refuses for what it was asked (a box listing's
// cursor it never gave) is the caller's mistake, not a source error.
func TestSourceErrorsLeaveOutRefusedRequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	src := observeSource(memory.New(0), reg)
	lister := src.(ratelimits.BoxLister)
	if _, err := lister.ListBox(context.Background(), 0, "101", "zzz", 10); !errors.Is(err, ratelimits.ErrInvalidArgument) {
		t.Fatalf("ListBox with a cursor it never gave: %v, want ErrInvalidArgument", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "limiter_source_operation_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == "list_box" && m.GetCounter().GetValue() != 0 {
				t.Errorf(`limiter_source_operation_errors_total{op="list_box"} = %v after a refused listing, want 0`, m.GetCounter().GetValue())
			}
		}
	}
}
