package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files a TLS server's directory holds, as redis-server is given them.
const (
	caFileName   = "ca.pem"
	certFileName = "server.crt"
	keyFileName  = "server.key"
)

// testCA is a throwaway certificate authority: its certificate, and the
// key it signs servers' certificates with. It lives only in memory, for
// the servers of one test (one server, or every node of one cluster), and
// no certificate it signs outlives the test.
type testCA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// newCA makes a CA. It is done in Go (crypto/x509), not with the openssl
// command, so the tests need nothing more than redis-server.
func newCA() (*testCA, error) {
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	// A nil SerialNumber makes CreateCertificate pick a random one.
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour), // some slack for clock steps
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testCA{cert: cert, der: der, key: key}, nil
}

// writeTLSFiles writes into dir the CA's certificate and a certificate
// for 127.0.0.1 and localhost signed by it, with its key (ca.pem,
// server.crt, server.key), and returns a client config that trusts that
// CA alone. A CA made for one server means trusting ca.pem trusts that
// server and nothing else; the nodes of a cluster share one, so that they
// trust each other on the cluster bus.
func writeTLSFiles(dir string, ca *testCA) (*tls.Config, error) {
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour),
		NotAfter:  now.Add(24 * time.Hour),
		KeyUsage:  x509.KeyUsageDigitalSignature,
		// Client auth too: cluster nodes present their certificate when
		// they connect to each other on the bus.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		typ  string
		der  []byte
	}{
		{caFileName, "CERTIFICATE", ca.der},
		{certFileName, "CERTIFICATE", leafDER},
		{keyFileName, "PRIVATE KEY", keyDER},
	} {
		b := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(filepath.Join(dir, f.name), b, 0o600); err != nil {
			return nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
