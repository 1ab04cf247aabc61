package redis_test

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
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
			out := make([]gcra.Outcome, 1)
			for name, err := range map[string]error{
				"Spend": src.Spend(ctx, now, []gcra.Op{hourly("a", 1)}, out),
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
