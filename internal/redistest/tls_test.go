package redistest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// A TLS server answers over TLS to a client that trusts its CA file, by
// IP and by the name localhost; it has no plaintext port, and a client
// trusting only the system's roots fails verification. Flush, Stop and
// Start work on it as on any server.
func TestStandaloneTLS(t *testing.T) {
	s := NewStandaloneTLS(t)
	if want := "rediss://" + s.Addr(); s.URL() != want {
		t.Fatalf("URL %q, want %q", s.URL(), want)
	}
	pem, err := os.ReadFile(s.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", s.CAFile())
	}
	ping := func(cfg *tls.Config) error {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
		conn, err := d.Dial("tcp", s.Addr())
		if err != nil {
			return err
		}
		got, err := roundTrip(conn, []string{"PING"})
		if err == nil && got != "PONG" {
			err = errors.New("PING answered " + got)
		}
		return err
	}
	if err := ping(&tls.Config{RootCAs: roots}); err != nil {
		t.Fatalf("PING over TLS trusting %s: %v", s.CAFile(), err)
	}
	if err := ping(&tls.Config{RootCAs: roots, ServerName: "localhost"}); err != nil {
		t.Fatalf("PING over TLS as localhost: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	if err := ping(&tls.Config{}); !errors.As(err, &unknown) {
		t.Fatalf("PING over TLS trusting the system's roots: %v, want an unknown authority", err)
	}
	if _, err := Do(s.Addr(), "PING"); err == nil {
		t.Fatal("the TLS server answered a plaintext PING")
	}
	// The helpers talk TLS to it too, and a restart keeps it TLS only.
	s.Flush(t)
	s.Stop(t)
	s.Start(t)
	if err := ping(&tls.Config{RootCAs: roots}); err != nil {
		t.Fatalf("PING over TLS after a restart: %v", err)
	}
	if _, err := Do(s.Addr(), "PING"); err == nil {
		t.Fatal("the restarted TLS server answered a plaintext PING")
	}
}
