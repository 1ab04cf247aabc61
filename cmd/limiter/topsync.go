package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/topdenied"
)

// topLister returns what GET /v1/admin/top answers: on a source that
// can hold the processes' lists (Redis), the fleet's, pushed every
// interval until ctx ends; otherwise this process's alone.
func topLister(ctx context.Context, rec *topdenied.Recorder, src ratelimits.Source, clk clock.Clock, interval, timeout time.Duration, log *slog.Logger) topdenied.Lister {
	store, ok := src.(topdenied.Store)
	if !ok {
		return rec
	}
	fleet := topdenied.NewFleet(rec, store, processName(), 3*interval)
	go pushTops(ctx, fleet, clk, interval, timeout, log)
	return fleet
}

// pushTops pushes the process's top lists now and every interval on the
// service's clock, until ctx ends. A failed push is logged; the next one
// tries again, and the previous one lasts three intervals meanwhile.
func pushTops(ctx context.Context, fleet *topdenied.Fleet, clk clock.Clock, interval, timeout time.Duration, log *slog.Logger) {
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		if err := fleet.Push(pctx); err != nil && ctx.Err() == nil {
			log.Warn("pushing the top denied ids failed; other processes show this one's last push until it expires", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-clk.After(interval):
		}
	}
}

// processName names this process in the fleet: its host and pid for
// people, and random bytes so that two processes never share a name.
func processName() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
