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

// writeTLSFiles makes a throwaway CA and a certificate for 127.0.0.1 and
// localhost signed by it, writes them into dir (ca.pem, server.crt,
// server.key), and returns a client config that trusts that CA alone.
//
// It is done in Go (crypto/x509), not with the openssl command, so the
// tests need nothing more than redis-server. A fresh CA per server, whose
// key is dropped once it has signed, means trusting ca.pem trusts this one
// server and nothing else, and no certificate outlives the test.
func writeTLSFiles(dir string) (*tls.Config, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	// A nil SerialNumber makes CreateCertificate pick a random one.
	caTemplate := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour), // some slack for clock steps
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
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
		{caFileName, "CERTIFICATE", caDER},
		{certFileName, "CERTIFICATE", leafDER},
		{keyFileName, "PRIVATE KEY", keyDER},
	} {
		b := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(filepath.Join(dir, f.name), b, 0o600); err != nil {
			return nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
