package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name        string
		live, floor uint64
		want        int
	}{
		{"small heap: the heap minimum reaches the floor", 1 * mib, 64 * mib, 1600},
		{"bigger heap: live times (1 + GOGC/100) reaches the floor", 10 * mib, 64 * mib, 540},
		{"live heap at half the floor: Go's default", 32 * mib, 64 * mib, 100},
		{"live heap past the floor: Go's default", 200 * mib, 64 * mib, 100},
		{"nothing measured yet", 0, 64 * mib, 100},
		{"a tiny heap does not overflow", 1, math.MaxUint64 / 200, math.MaxInt32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gcPercentFor(tt.live, tt.floor); got != tt.want {
				t.Errorf("gcPercentFor(%d, %d) = %d, want %d", tt.live, tt.floor, got, tt.want)
			}
		})
	}
}

// The percentage follows the live heap from one collection to the next:
// raised while the heap is small, back to 100 once it holds more than half
// the floor.
func TestGCFloorFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 64 << 20
	runtime.GC() // so the live heap is this test's, not what earlier tests left
	g := startGCFloor(floor)
	defer g.stop()
	if p := g.tuned.Load(); p <= 100 {
		t.Fatalf("a test binary's small heap got GOGC %d, want more than 100", p)
	}
	if p := debug.SetGCPercent(-1); int64(p) != g.tuned.Load() {
		t.Errorf("GOGC is %d, the tuner says it set %d", p, g.tuned.Load())
	}
	debug.SetGCPercent(int(g.tuned.Load()))

	big := make([]byte, 48<<20) // more than half the floor, kept live
	for i := range big {
		big[i] = byte(i)
	}
	// The tuner runs in a cleanup after a collection; collect until it has.
	for i := 0; i < 1000 && g.tuned.Load() != 100; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	runtime.KeepAlive(big)
	if p := g.tuned.Load(); p != 100 {
		t.Errorf("with 48 MiB live and a 64 MiB floor, GOGC is %d, want 100", p)
	}
}

// The heap grows to about the floor between collections, not to Go's
// default of a few megabytes, and not past it either: a percentage set
// from the live heap alone would also raise Go's minimum heap, which
// scales with GOGC, to gigabytes, and 512 MiB of garbage would not be
// collected once. So: the garbage must be collected several times, and
// once the tuner has seen a clean collection the heap goal must be about
// the floor.
//
// The goal is not checked while the garbage pours in, nor the heap's peak:
// objects allocated while a collection marks count as live for it, and
// this loop allocates gigabytes a second, so on a busy machine one
// collection reported tens of MiB live and the goal stood at that times
// 1 + GOGC/100 (up to 907 MiB) until the next one, with every package's
// tests running at once. A service allocates a thousand times slower.
//
// The test runs in a process of its own: GOGC, the heap and its goal
// belong to the whole process, and in a shared one the tuners of earlier
// tests, whose last cleanups can still be running, would take part.
func TestGCFloorBoundsTheHeap(t *testing.T) {
	if os.Getenv(gcChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGCFloorBoundsTheHeap$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), gcChildEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in a process of its own: %v\n%s", err, out)
		}
		return
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 64 << 20
	runtime.GC()
	g := startGCFloor(floor)
	defer g.stop()
	sample := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(sample)
	cyclesBefore := sample[1].Value.Uint64()
	var sink []byte
	for i := range 8192 { // 512 MiB of garbage, 64 KiB at a time
		sink = make([]byte, 64<<10)
		sink[len(sink)-1] = byte(i)
	}
	runtime.KeepAlive(sink)
	metrics.Read(sample)
	if cycles := sample[1].Value.Uint64() - cyclesBefore; cycles < 2 {
		t.Fatalf("512 MiB of garbage took %d collections, want several", cycles)
	}
	// Collect until the tuner has run after a collection with nothing
	// pouring in (it runs in a cleanup, after the collection).
	var goal uint64
	for range 100 {
		runtime.GC()
		runtime.Gosched()
		metrics.Read(sample)
		if goal = sample[0].Value.Uint64(); goal >= floor/2 && goal <= 2*floor {
			return
		}
	}
	t.Errorf("heap goal %d MiB with a %d MiB floor, want about the floor", goal>>20, floor>>20)
}

// gcChildEnv marks the process TestGCFloorBoundsTheHeap runs itself in.
const gcChildEnv = "LIMITER_TEST_GC_FLOOR_CHILD"

func TestCgroupMemoryLimit(t *testing.T) {
	write := func(t *testing.T, root, name, content string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, file, content string
		want                uint64
	}{
		{"v2 limit", "memory.max", "268435456\n", 256 << 20},
		{"v2 no limit", "memory.max", "max\n", 0},
		{"v1 limit", "memory/memory.limit_in_bytes", "134217728\n", 128 << 20},
		{"v1 no limit", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"garbage", "memory.max", "lots\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tt.file, tt.content)
			if got := cgroupMemoryLimit(root); got != tt.want {
				t.Errorf("cgroupMemoryLimit = %d, want %d", got, tt.want)
			}
		})
	}
	if got := cgroupMemoryLimit(t.TempDir()); got != 0 {
		t.Errorf("no cgroup files: %d, want 0", got)
	}
}

func TestGCFloorFor(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name                     string
		configured, limit, floor uint64
	}{
		{"no container limit", 64 * mib, 0, 64 * mib},
		{"a roomy container", 64 * mib, 1024 * mib, 64 * mib},
		{"a 128 MiB container: a quarter of it", 64 * mib, 128 * mib, 32 * mib},
	} {
		if got := gcFloorFor(tt.configured, tt.limit); got != tt.floor {
			t.Errorf("%s: gcFloorFor(%d, %d) = %d, want %d", tt.name, tt.configured, tt.limit, got, tt.floor)
		}
	}
}
