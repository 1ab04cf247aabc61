package redis_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
)

// tlsOptions parses a rediss:// URL, as the service does, and makes the
// source trust the CAs in caFile (the system's roots when caFile is "").
func tlsOptions(t *testing.T, url, caFile string) redis.Options {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	if opts.TLS == nil {
		t.Fatalf("%s parsed without TLS", url)
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		opts.TLS.RootCAs = x509.NewCertPool()
		if !opts.TLS.RootCAs.AppendCertsFromPEM(pem) {
			t.Fatalf("%s holds no PEM certificate", caFile)
		}
	}
	return opts
}

// A rediss:// source trusting the server's CA pings and spends over TLS
// (the server has no plaintext port), and its buckets persist between
// calls.
func TestTLS(t *testing.T) {
	srv := redistest.NewStandaloneTLS(t)
	src := newSource(t, tlsOptions(t, srv.URL(), srv.CAFile()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := src.Ping(ctx); err != nil {
		t.Fatalf("Ping over TLS: %v", err)
	}
	for _, want := range []int64{99, 98} {
		if out := spend(t, src, now, hourly("a", 1))[0]; !out.Allowed || out.Remaining != want {
			t.Fatalf("spend over TLS: %+v, want allowed with %d remaining", out.Decision, want)
		}
	}
}

// A rediss:// source that does not trust the CA of the server's
// certificate (the system's roots, or another CA) fails every call with a
// certificate error, promptly: it neither hangs nor talks to the server.
func TestTLSUnknownAuthority(t *testing.T) {
	srv := redistest.NewStandaloneTLS(t)
	other := redistest.NewStandaloneTLS(t)
	for _, tt := range []struct{ name, caFile string }{
		{"SystemRoots", ""},
		{"OtherCA", other.CAFile()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := newSource(t, tlsOptions(t, srv.URL(), tt.caFile))
			// Past the source's one-second timeouts, so a hang shows as a
			// timeout error, not as a certificate error.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			out := make([]bucket.Outcome, 1)
			for name, err := range map[string]error{
				"Spend": src.Spend(ctx, now, []bucket.Op{hourly("a", 1)}, out),
				"Ping":  src.Ping(ctx),
			} {
				var unknown x509.UnknownAuthorityError
				if !errors.As(err, &unknown) {
					t.Errorf("%s: %v, want a certificate signed by an unknown authority", name, err)
				}
			}
		})
	}
}

// A rediss-cluster:// source trusting the cluster's CA spends over TLS on
// every master, and a batch whose keys sit on three masters is decided
// whole: the nodes speak TLS only, clients and bus alike, so nothing can
// have gone over plaintext.
func TestClusterTLS(t *testing.T) {
	c := redistest.NewClusterTLS(t)
	opts := tlsOptions(t, c.URL(), c.CAFile())
	src := newSource(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := src.Ping(ctx); err != nil {
		t.Fatalf("Ping over TLS: %v", err)
	}
	// The cluster's own view of who serves which slot, over TLS too.
	raw := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: opts.Addrs, TLSConfig: opts.TLS})
	defer raw.Close()
	slots, err := raw.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	masterOf := func(key string) string {
		slot := redis.Slot(key)
		for _, r := range slots {
			if slot >= r.Start && slot <= r.End {
				return r.Nodes[0].Addr
			}
		}
		t.Fatalf("no master serves slot %d", slot)
		return ""
	}
	// Keys until every master has some, each spent twice; one key per
	// master for the batch below.
	var keys []string
	first := map[string]string{}
	for i := 0; len(first) < len(c.Servers) || len(keys) < 12; i++ {
		key := fmt.Sprintf("k%d", i)
		keys = append(keys, key)
		if m := masterOf(key); first[m] == "" {
			first[m] = key
		}
	}
	for round, want := range []int64{99, 98} {
		for _, key := range keys {
			if out := spend(t, src, now, hourly(key, 1))[0]; !out.Allowed || out.Remaining != want {
				t.Fatalf("round %d, %s: %+v, want allowed with %d remaining", round, key, out.Decision, want)
			}
		}
	}
	err = raw.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if err == nil && n == 0 {
			err = fmt.Errorf("master %s holds no bucket", m.Options().Addr)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A batch across the three masters that one bucket cannot take: none
	// of the three is spent.
	var batch []bucket.Op
	for _, key := range first {
		batch = append(batch, hourly(key, 1))
	}
	batch[1].Cost = 99
	if out := spend(t, src, now, batch...); out[0].Allowed && out[1].Allowed && out[2].Allowed {
		t.Fatalf("a batch over the burst was allowed: %+v", out)
	}
	for _, op := range batch {
		check := hourly(op.Key, 0)
		check.Mode = bucket.CheckOnly
		if out := spend(t, src, now, check)[0]; out.Remaining != 98 {
			t.Fatalf("%s after the denied batch: %d remaining, want 98", op.Key, out.Remaining)
		}
	}
}
