package envoyapi_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/jmhodges/clock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/envoyapi"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// vectorsDomain is the domain of the replayed requests: each limit is the
// rule of a descriptor of one entry keyed by its name.
const vectorsDomain = "vectors"

// Every public vector file replayed against two Limiters in lockstep on
// fake clocks: one driven through the library, the other through the gRPC
// server wherever Envoy's service can say a step (a spend whose
// transactions all check and spend at least 1), and through the library
// otherwise, so both stay in the same state. Each gRPC answer must say
// what the library decided.
func TestPublicVectorsOverGRPC(t *testing.T) {
	for name, load := range map[string]func() (*vectors.File, error){"gcra": vectors.Public, "algorithms": vectors.Algorithms} {
		t.Run(name, func(t *testing.T) {
			f, err := load()
			if err != nil {
				t.Fatal(err)
			}
			r := newReplay(t, f)
			r.run(f)
			if r.overGRPC == 0 {
				t.Fatal("no step went through gRPC")
			}
			t.Logf("%d of %d steps through gRPC", r.overGRPC, r.steps)
		})
	}
}

// replay holds the two sides of a vectors replay.
type replay struct {
	t        *testing.T
	cfg      *ratelimits.Config
	lib      *vectors.LimiterDriver // the reference, through the library
	side     *vectors.LimiterDriver // the gRPC server's Limiter, for steps gRPC cannot say
	client   rlsv3.RateLimitServiceClient
	steps    int
	overGRPC int
}

func newReplay(t *testing.T, f *vectors.File) *replay {
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	begin, err := f.StartTime(startTime)
	if err != nil {
		t.Fatal(err)
	}
	limiter := func() *vectors.LimiterDriver {
		clk := clock.NewFake()
		clk.Set(begin)
		l, err := ratelimits.NewLimiter(cfg, memory.New(0), clk)
		if err != nil {
			t.Fatal(err)
		}
		return &vectors.LimiterDriver{Limiter: l, Clock: clk}
	}
	lib, side := limiter(), limiter()

	var rules []descriptors.Rule
	for _, n := range cfg.Names() {
		rules = append(rules, descriptors.Rule{Keys: []string{n.Limit}, Limit: n.Limit})
	}
	srv := envoyapi.New(envoyapi.Options{Limiter: side.Limiter, Rules: mustRules(t, []descriptors.Domain{{Name: vectorsDomain, Rules: rules}})})
	client := serveForTest(t, srv)
	return &replay{t: t, cfg: cfg, lib: lib, side: side, client: client}
}

// serveForTest serves srv on a loopback listener until the test ends and
// returns a client of it.
func serveForTest(t testing.TB, srv *envoyapi.Server) rlsv3.RateLimitServiceClient {
	t.Helper()
	return rlsv3.NewRateLimitServiceClient(serveConn(t, srv))
}

// serveConn serves srv on a loopback listener until the test ends, when
// Shutdown must stop it cleanly, and returns a connection to it.
func serveConn(t testing.TB, srv *envoyapi.Server) *grpc.ClientConn {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
	})
	return conn
}

func (r *replay) run(f *vectors.File) {
	t := r.t
	for _, sc := range f.Scenarios {
		for i, st := range sc.Steps {
			where := fmt.Sprintf("scenario %q step %d", sc.Name, i)
			switch {
			case st.Advance != "":
				d, err := time.ParseDuration(st.Advance)
				if err != nil {
					t.Fatalf("%s: advance %q: %v", where, st.Advance, err)
				}
				r.lib.Clock.Add(d)
				r.side.Clock.Add(d)
				continue
			case st.ERL != nil:
				r.steps++
				a, errA := r.lib.ERL(st.ERL)
				b, errB := r.side.ERL(st.ERL)
				if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
					t.Fatalf("%s: %s: the two Limiters differ: %+v (%v) and %+v (%v)", where, st.ERL.Call, a, errA, b, errB)
				}
				continue
			}
			r.steps++
			want, err := r.lib.Do(st.Op, st.Txns)
			if err != nil {
				t.Fatalf("%s: %s through the library: %v", where, st.Op, err)
			}
			if r.sayable(st) {
				r.overGRPC++
				r.compare(where, st, want)
				continue
			}
			got, err := r.side.Do(st.Op, st.Txns)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s: the two Limiters differ: %+v (%v) and %+v", where, st.Op, got, err, want)
			}
		}
	}
}

// sayable reports whether Envoy's service can send step: a spend whose
// transactions all check and spend at least 1 token of a known limit.
func (r *replay) sayable(st vectors.Step) bool {
	if st.Op != "spend" {
		return false
	}
	for _, txn := range st.Txns {
		if (txn.Mode != "" && txn.Mode != "check-and-spend") || (txn.Cost != nil && *txn.Cost < 1) {
			return false
		}
		if _, ok := r.cfg.Lookup(txn.Limit); !ok {
			return false
		}
	}
	return true
}

// compare sends step through gRPC, one descriptor per transaction with its
// cost as the descriptor's hits_addend (none when the step gives no
// cost), and checks the answer against want, the library's.
func (r *replay) compare(where string, st vectors.Step, want vectors.Result) {
	t := r.t
	req := &rlsv3.RateLimitRequest{Domain: vectorsDomain}
	for _, txn := range st.Txns {
		d := desc(txn.Limit, txn.ID)
		if txn.Cost != nil {
			withHits(d, uint64(*txn.Cost))
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	resp, err := r.client.ShouldRateLimit(context.Background(), req)
	if want.Status != 200 {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v refused by the library (%d), over gRPC %v", where, st.Txns, want.Status, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v: %v", where, st.Txns, err)
	}
	if got := resp.GetOverallCode() == rlsv3.RateLimitResponse_OK; got != want.Allowed {
		t.Errorf("%s: %v: overall %v, library allowed %v", where, st.Txns, resp.GetOverallCode(), want.Allowed)
	}
	if len(resp.GetStatuses()) != len(want.Decisions) {
		t.Fatalf("%s: %d statuses for %d decisions", where, len(resp.GetStatuses()), len(want.Decisions))
	}
	for i, s := range resp.GetStatuses() {
		wd := want.Decisions[i]
		if s.GetCurrentLimit() == nil {
			// Unlimited: allowed, nothing counted.
			if s.GetCode() != rlsv3.RateLimitResponse_OK || !wd.Allowed || wd.Remaining != math.MaxInt64 {
				t.Errorf("%s: descriptor %d (%v): unlimited over gRPC (%v), library %+v", where, i, st.Txns[i], s, wd)
			}
			continue
		}
		info, _ := r.cfg.Lookup(wd.Limit)
		wantCode := rlsv3.RateLimitResponse_OVER_LIMIT
		if wd.Allowed || r.cfg.Shadow(info.Name) {
			wantCode = rlsv3.RateLimitResponse_OK
		}
		reset := s.GetDurationUntilReset().AsDuration()
		wantReset := time.Duration((wd.ResetIn+int64(time.Millisecond)-1)/int64(time.Millisecond)) * time.Millisecond
		if s.GetCode() != wantCode || int64(s.GetLimitRemaining()) != min(wd.Remaining, math.MaxUint32) || reset != wantReset ||
			s.GetCurrentLimit().GetName() != wd.Limit {
			t.Errorf("%s: descriptor %d (%v):\n over gRPC %v %s remaining %d reset %v\n library  %v %s remaining %d reset %v",
				where, i, st.Txns[i], s.GetCode(), s.GetCurrentLimit().GetName(), s.GetLimitRemaining(), reset,
				wantCode, wd.Limit, wd.Remaining, wantReset)
		}
	}
}
