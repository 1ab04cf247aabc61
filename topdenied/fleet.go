package topdenied

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/internal/spacesaving"
)

// Store keeps each process's top lists where every process can read them
// (the Redis source): pushed with an expiry, so that a process that stops
// drops out of the fleet's lists once it has passed.
type Store interface {
	PushTop(ctx context.Context, process string, payload []byte, ttl time.Duration) error
	PullTops(ctx context.Context) ([][]byte, error)
}

// Fleet answers the top lists of every live process sharing a Store:
// this process's counted now, and the others' as they last pushed them.
type Fleet struct {
	rec     *Recorder
	store   Store
	process string
	ttl     time.Duration
}

// NewFleet shares rec's lists through store under the name process (one
// per process, unique in the fleet). A push lasts ttl: longer than the
// time between pushes, so a live process never drops out between two.
func NewFleet(rec *Recorder, store Store, process string, ttl time.Duration) *Fleet {
	return &Fleet{rec: rec, store: store, process: process, ttl: ttl}
}

// pushed is one process's lists as the Store holds them.
type pushed struct {
	Process string          `json:"process"`
	Windows map[string]View `json:"windows"`
}

// Push stores this process's lists of every window: per limit, the
// Counters highest, so a push is bounded by the configuration's limits,
// whatever the ids. A process that denied nothing over the longest window
// writes nothing: an idle fleet leaves no keys in the store, and a list
// that has just emptied drops out when its last push expires.
func (f *Fleet) Push(ctx context.Context) error {
	p := pushed{Process: f.process, Windows: map[string]View{}}
	any := false
	for _, w := range Windows() {
		v := f.rec.View(w)
		for l, s := range v {
			v[l] = s.Top(Counters)
			any = any || len(s.Counters) > 0
		}
		p.Windows[w.String()] = v
	}
	if !any {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return f.store.PushTop(ctx, f.process, b, f.ttl)
}

// Top lists the fleet's ids denied most in w: this process's lists as
// they are now, merged with every other live process's last push.
func (f *Fleet) Top(ctx context.Context, limit string, w Window) ([]Entry, error) {
	raw, err := f.store.PullTops(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the other processes' top lists: %w", err)
	}
	views := []View{f.rec.View(w)}
	for _, b := range raw {
		var p pushed
		if json.Unmarshal(b, &p) != nil || p.Process == f.process {
			continue // unreadable (a newer format, say), or this process's own
		}
		if v := bounded(p.Windows[w.String()]); len(v) > 0 {
			views = append(views, v)
		}
	}
	return Top(views, limit, MaxList), nil
}

// bounded keeps what another process pushed to the size this one would
// push, so a bad payload cannot make a read grow beyond it.
func bounded(v View) View {
	for l, s := range v {
		if len(s.Counters) > Counters {
			v[l] = spacesaving.Summary{Counters: s.Counters[:Counters], Floor: max(s.Floor, s.Counters[Counters].Count), Total: s.Total}
		}
	}
	return v
}
