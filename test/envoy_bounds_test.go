package test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"

	"github.com/limiter-dev/limiter/internal/rawgrpc"
)

// rssBytes is the resident memory of process pid, from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc to read the process's memory from: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return kib << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// The served binary, with the stream cap and the call timeout set through
// their variables, under one connection opening 20,000 ShouldRateLimit
// calls it never sends the request of: it refuses all but the cap at
// once, its memory stays about where it was, another client is served,
// and the calls it holds end with DEADLINE_EXCEEDED at the call timeout.
// Without the bounds, the process grew by over 200 MiB and kept it for as
// long as the connection stayed open.
func TestEnvoyHalfOpenCallsAreBounded(t *testing.T) {
	const (
		attack      = 20000
		maxStreams  = 100
		callTimeout = 2 * time.Second
		maxGrowth   = 64 << 20
	)
	env, _ := envoyConfig(t, envoyRules)
	env["LIMITER_GRPC_MAX_CONCURRENT_STREAMS"] = strconv.Itoa(maxStreams)
	env["LIMITER_GRPC_CALL_TIMEOUT"] = callTimeout.String()
	// Go's own pace of collection, so that the resident memory follows
	// what the process holds rather than the heap floor's garbage.
	env["LIMITER_GC_HEAP_FLOOR_MIB"] = "0"
	e := startEnvoy(t, procOptions{Env: env})
	e.mustShould(t, rlRequest("edge", desc("remote_address", "192.0.2.50"))) // the client's connection is up
	before := rssBytes(t, e.cmd.Process.Pid)

	c, err := rawgrpc.Dial(e.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	if err := c.Open(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, attack); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil { // the server has read every call's headers
		t.Fatal(err)
	}
	arrived := time.Since(began)
	after := rssBytes(t, e.cmd.Process.Pid)
	refused := c.Counts().Refused
	t.Logf("%d calls without a request arrived in %v: resident memory %d KiB then %d KiB, %d refused",
		attack, arrived, before>>10, after>>10, refused)
	if after-before > maxGrowth {
		t.Errorf("resident memory grew by %d KiB with the calls under way; want at most %d KiB", (after-before)>>10, maxGrowth>>10)
	}
	// The cap holds at every moment: calls that took longer than the call
	// timeout to arrive (a loaded machine) let the first held ones end,
	// and as many more be taken.
	if mostHeld := maxStreams * (1 + int(arrived/callTimeout)); refused < attack-mostHeld || refused > attack-maxStreams {
		t.Errorf("%d calls refused; want %d to %d: all beyond LIMITER_GRPC_MAX_CONCURRENT_STREAMS=%d held at once", refused, attack-mostHeld, attack-maxStreams, maxStreams)
	}

	if resp, err := e.should("", rlRequest("edge", desc("remote_address", "192.0.2.51"))); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("another client's call during the attack: %v, %v; want OK", resp, err)
	}

	waitCtx, stopWait := context.WithTimeout(context.Background(), callTimeout+10*time.Second)
	defer stopWait()
	accepted := attack - refused
	counts, err := c.Wait(waitCtx, func(n rawgrpc.Counts) bool { return n.Status[codes.DeadlineExceeded] >= accepted })
	if err != nil {
		t.Fatalf("%v after the attack began: %+v; want %d calls ended with DEADLINE_EXCEEDED", time.Since(began), counts, accepted)
	}
	if ended := time.Since(began); ended < callTimeout {
		t.Errorf("the held calls ended %v after their headers were sent, before LIMITER_GRPC_CALL_TIMEOUT=%v", ended, callTimeout)
	}
	if !e.alive() {
		t.Fatalf("the process exited:\n%s", e.logs())
	}
}
