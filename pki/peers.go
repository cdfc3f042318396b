package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// Files names the PEM files of a node's TLS material.
type Files struct {
	CA, Cert, Key string
}

// ReadKey reads the private key file; it refuses a file other users can read (the node passes
// its own secret-file reader so that one rule holds for every secret).
type ReadKey func(path string) ([]byte, error)

// Peers is this node's TLS material — the cluster CA and its node certificate — and the TLS
// configurations of its peer connections. Files are read again by Reload (and Watch when they
// change): connections opened afterwards use the new material, open ones keep theirs. Safe
// for concurrent use.
type Peers struct {
	files   Files
	readKey ReadKey
	id      string // the node id of the certificate; a reload may not change it
	cur     atomic.Pointer[material]
}

type material struct {
	cert  tls.Certificate
	roots *x509.CertPool
	stamp string // the files' sizes and modification times, to see changes
}

// Load reads the material. The certificate must be a node certificate of the CA.
func Load(files Files, readKey ReadKey) (*Peers, error) {
	p := &Peers{files: files, readKey: readKey}
	m, id, err := p.read()
	if err != nil {
		return nil, err
	}
	p.id = id
	p.cur.Store(m)
	return p, nil
}

// ID is the node id of this node's certificate.
func (p *Peers) ID() string { return p.id }

// Expiry is when this node's certificate expires.
func (p *Peers) Expiry() time.Time { return p.cur.Load().cert.Leaf.NotAfter }

func (p *Peers) read() (*material, string, error) {
	stamp, err := stampOf(p.files)
	if err != nil {
		return nil, "", err
	}
	caPEM, err := os.ReadFile(p.files.CA)
	if err != nil {
		return nil, "", fmt.Errorf("TLS CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, "", fmt.Errorf("TLS CA %s holds no PEM certificate", p.files.CA)
	}
	certPEM, err := os.ReadFile(p.files.Cert)
	if err != nil {
		return nil, "", fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := p.readKey(p.files.Key)
	if err != nil {
		return nil, "", err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's errors describe the PEM blocks, never the key's bytes.
		return nil, "", fmt.Errorf("TLS certificate %s and key %s: %w", p.files.Cert, p.files.Key, err)
	}
	chain := make([]*x509.Certificate, len(cert.Certificate))
	for i, der := range cert.Certificate {
		if chain[i], err = x509.ParseCertificate(der); err != nil {
			return nil, "", fmt.Errorf("TLS certificate %s: %w", p.files.Cert, err)
		}
	}
	id, err := Verify(chain, roots, "")
	if err != nil {
		return nil, "", fmt.Errorf("TLS certificate %s: %w", p.files.Cert, err)
	}
	return &material{cert: cert, roots: roots, stamp: stamp}, id, nil
}

func stampOf(f Files) (string, error) {
	var s string
	for _, path := range []string{f.CA, f.Cert, f.Key} {
		st, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("TLS material: %w", err)
		}
		s += fmt.Sprintf("%d.%d;", st.Size(), st.ModTime().UnixNano())
	}
	return s, nil
}

// Reload reads the files again. On error the material in use stays. A certificate for
// another node id is refused: a node's identity is fixed for its life.
func (p *Peers) Reload() error {
	m, id, err := p.read()
	if err != nil {
		return err
	}
	if id != p.id {
		return fmt.Errorf("TLS certificate %s is node %q's; this node is %q", p.files.Cert, id, p.id)
	}
	p.cur.Store(m)
	return nil
}

// Watch reloads the material whenever its files change (checked every interval) until ctx
// ends, logging each reload and each failure.
func (p *Peers) Watch(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stamp, err := stampOf(p.files)
		if err != nil || stamp == p.cur.Load().stamp {
			continue
		}
		if err := p.Reload(); err != nil {
			logger.Error("TLS material changed but cannot be used; keeping the current one", "error", err)
			continue
		}
		logger.Info("TLS material reloaded", "expires", p.Expiry())
	}
}

// ServerConfig is the TLS configuration of a peer port: TLS 1.3, and the client must present
// a node certificate of the cluster CA (any node's).
func (p *Peers) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is verified in VerifyConnection, against the CA in use at that moment.
		ClientAuth: tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &p.cur.Load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := Verify(cs.PeerCertificates, p.cur.Load().roots, "")
			return err
		},
	}
}

// ClientConfig is the TLS configuration to reach a peer: TLS 1.3, presenting this node's
// certificate, and the server must present a node certificate of the cluster CA naming node
// want (any node when want is empty: an address given by an operator, such as --join).
func (p *Peers) ClientConfig(want string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Host names are not what identifies a node; VerifyConnection checks the chain against
		// the cluster CA and the node id in the certificate's URI instead.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &p.cur.Load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := Verify(cs.PeerCertificates, p.cur.Load().roots, want)
			return err
		},
	}
}

// PeerID returns the node id of the peer of an established TLS connection (verified during
// the handshake by the configurations above).
func PeerID(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("no peer certificate")
	}
	return NodeID(cs.PeerCertificates[0])
}
