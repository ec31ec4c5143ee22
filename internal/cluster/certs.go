package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is what the API server needs: a CA, a serving certificate for
// 127.0.0.1 signed by it, and the service account signing key pair.
type PKI struct {
	CACert, ServerCert, ServerKey string // file paths
	SAKey, SAPub                  string
	CAPEM                         []byte
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// NewPKI writes a fresh CA, serving certificate and service account key pair
// into dir. The serving certificate names 127.0.0.1, the kubernetes
// Service's ClusterIP (pods reach the API server through it) and extraIPs.
func NewPKI(dir string, extraIPs ...net.IP) (*PKI, error) {
	p := &PKI{
		CACert: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "apiserver.crt"),
		ServerKey: filepath.Join(dir, "apiserver.key"), SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"),
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "socklb-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	ca, err := newCert(caTmpl, nil)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesServiceIP)}, extraIPs...),
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}
	srv, err := newCert(srvTmpl, ca)
	if err != nil {
		return nil, err
	}
	saKeyDER, saPubDER, err := newSAKey()
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{
		{p.CACert, "CERTIFICATE", ca.der},
		{p.ServerCert, "CERTIFICATE", srv.der},
		{p.ServerKey, "EC PRIVATE KEY", srv.keyDER},
		{p.SAKey, "RSA PRIVATE KEY", saKeyDER},
		{p.SAPub, "PUBLIC KEY", saPubDER},
	} {
		if err := writePEM(f.path, f.typ, f.der); err != nil {
			return nil, err
		}
	}
	p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
	return p, nil
}

// keyCert is a P-256 key and its certificate, parsed and in DER.
type keyCert struct {
	key    *ecdsa.PrivateKey
	keyDER []byte
	cert   *x509.Certificate
	der    []byte
}

// newCert makes a key and a certificate of it from tmpl, signed by
// parent (self-signed when parent is nil).
func newCert(tmpl *x509.Certificate, parent *keyCert) (*keyCert, error) {
	kc := &keyCert{}
	var err error
	if kc.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	signer, signerKey := tmpl, kc.key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	if kc.der, err = x509.CreateCertificate(rand.Reader, tmpl, signer, &kc.key.PublicKey, signerKey); err != nil {
		return nil, err
	}
	if kc.cert, err = x509.ParseCertificate(kc.der); err != nil {
		return nil, err
	}
	kc.keyDER, err = x509.MarshalECPrivateKey(kc.key)
	return kc, err
}

// newSAKey makes the RSA key pair kube-apiserver signs and checks
// ServiceAccount tokens with.
func newSAKey() (privDER, pubDER []byte, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err = x509.MarshalPKIXPublicKey(&key.PublicKey)
	return x509.MarshalPKCS1PrivateKey(key), pubDER, err
}
