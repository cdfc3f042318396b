package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Role is what a certificate is issued for.
type Role int

const (
	RoleNode   Role = iota // a cluster node: ServerAuth and ClientAuth, node URI
	RoleClient             // a client of the API: ClientAuth only, client URI; refused on peer ports
)

// Request describes a certificate to issue.
type Request struct {
	Role Role
	Name string // node id or client name
	// Hosts are DNS names and IP addresses put in the certificate's SANs, for tools that
	// check host names; nodes identify each other by the URI alone.
	Hosts    []string
	Validity time.Duration
}

// NewCA makes a self-signed CA certificate and its key (ECDSA P-256), PEM-encoded.
func NewCA(name string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, nil, key, nil, validity)
}

// Issue makes a certificate for req signed by the CA, and its key, PEM-encoded.
func Issue(caCertPEM, caKeyPEM []byte, req Request) (certPEM, keyPEM []byte, err error) {
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	if !ValidNodeID(req.Name) {
		return nil, nil, fmt.Errorf("name %q: use 1 to 64 of A-Z a-z 0-9 _ . -", req.Name)
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: req.Name}, KeyUsage: x509.KeyUsageDigitalSignature}
	switch req.Role {
	case RoleNode:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.URIs = append(tmpl.URIs, NodeURI(req.Name))
	case RoleClient:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.URIs = append(tmpl.URIs, ClientURI(req.Name))
	default:
		return nil, nil, fmt.Errorf("unknown role %d", req.Role)
	}
	for _, h := range req.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return sign(tmpl, ca, key, caKey, req.Validity)
}

// sign fills in serial number and validity and signs tmpl with parentKey (self-signed when
// parent is nil).
func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if validity <= 0 {
		return nil, nil, errors.New("validity must be positive")
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute), now.Add(validity)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("CA certificate: no PEM certificate")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("CA certificate: not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("CA key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, errors.New("CA key: not a PKCS #8 private key")
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, errors.New("CA key: not the key of the CA certificate")
	}
	return ca, key, nil
}
