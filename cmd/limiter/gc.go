package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
)

// defaultGCHeapFloorMiB is serve's --gc-heap-floor-mib: small next to any
// machine that runs a service, big enough that collections are seconds
// apart at thousands of requests per second.
const defaultGCHeapFloorMiB = 64

// goHeapMinimum is the Go runtime's minimum heap goal at GOGC=100. The
// runtime scales it with GOGC (runtime/mgcpacer.go: heapMinimum =
// defaultHeapMinimum * GOGC / 100), so at GOGC=1600 no collection starts
// below 64 MiB however small the live heap.
const goHeapMinimum = 4 << 20

// gcPercentFor returns the GOGC percentage that makes the next collection
// start at about floor bytes of heap when live bytes survived the last
// one, and never less than Go's default of 100.
//
// The service's live heap is small (about a megabyte with the Redis
// source), while every request leaves a few kilobytes of garbage. Go's
// default goal of twice the live heap, at least 4 MiB, then collects about
// a dozen times a second at 5,000 requests per second, and each mark phase
// of ~2 ms takes one of a small machine's cores: the 1-2% of requests
// that meet one make the p99 latency. A floor of a few tens of megabytes
// collects every few seconds instead, and once the live heap passes half
// the floor (a big memory source) the default takes over.
//
// Go's heap goal is the larger of the live heap times (1 + GOGC/100) and
// the minimum above, and both grow with GOGC, so the percentage is the
// smaller of the two that reach the floor: raising GOGC only by the live
// heap would raise the minimum with it, to gigabytes for a small heap.
func gcPercentFor(live, floor uint64) int {
	if live == 0 || floor <= 2*live {
		return 100
	}
	byLive := floor*100/live - 100
	byMinimum := floor * 100 / goHeapMinimum
	p := min(byLive, byMinimum)
	if p < 100 {
		return 100
	}
	if p > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(p)
}

// gcFloor re-tunes GOGC after every collection from the live heap it
// left, so that the next collection starts at about floor bytes of heap.
type gcFloor struct {
	floor   uint64
	stopped atomic.Bool
	tuned   atomic.Int64 // the last percentage set, not set again unchanged
	sample  []metrics.Sample
}

// gcSentinel is an object whose only job is to be collected: its cleanup
// runs once per garbage collection cycle. It holds a pointer so that it
// is never batched into a shared tiny allocation.
type gcSentinel struct{ _ *int }

// startGCFloor starts tuning. Stopping leaves the last percentage set.
func startGCFloor(floor uint64) *gcFloor {
	g := &gcFloor{floor: floor, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}}
	g.tune()
	g.arm()
	return g
}

// stop ends the tuning after the next collection.
func (g *gcFloor) stop() { g.stopped.Store(true) }

// arm makes a sentinel whose cleanup, after the next collection, tunes
// and arms again.
func (g *gcFloor) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(g *gcFloor) {
		if g.stopped.Load() {
			return
		}
		g.tune()
		g.arm()
	}, g)
}

func (g *gcFloor) tune() {
	metrics.Read(g.sample)
	// Before the first collection nothing is known to be live; the heap's
	// objects so far (the configuration, the source) stand in for it.
	var live uint64
	for _, s := range g.sample {
		if live == 0 && s.Value.Kind() == metrics.KindUint64 {
			live = s.Value.Uint64()
		}
	}
	p := gcPercentFor(live, g.floor)
	if int64(p) != g.tuned.Load() {
		debug.SetGCPercent(p)
		g.tuned.Store(int64(p))
	}
}

// cgroupMemoryLimit returns the memory limit of the cgroup mounted at root
// (in a container, the container's own), or 0 when there is none or it
// cannot be read. "max" (v2) and the huge values v1 uses for no limit
// count as none.
func cgroupMemoryLimit(root string) uint64 {
	// cgroup v2, then v1, relative to the cgroup file system's mount point.
	for _, name := range []string{"memory.max", "memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v >= 1<<62 {
			return 0 // "max", or v1's "unlimited"
		}
		return v
	}
	return 0
}

// gcFloorFor returns the heap floor to use: the configured one, but at
// most a quarter of the container's memory limit, so that a small
// container does not spend its memory on garbage waiting to be collected.
func gcFloorFor(configured, memoryLimit uint64) uint64 {
	if memoryLimit > 0 && configured > memoryLimit/4 {
		return memoryLimit / 4
	}
	return configured
}
