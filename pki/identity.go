// Package pki holds the identities of a cluster's nodes: certificates of the cluster CA that
// name a node (SAN URI spiffe://shardkeeper/node/<node-id>), the checks that accept a peer
// only with such a certificate, the TLS configurations built on them, and the issuing of a
// development CA and its certificates.
//
// Roles: a node certificate has both extended key usages ServerAuth and ClientAuth and a node
// URI; a client certificate has ClientAuth only and a client URI. Peer ports accept node
// certificates only, so a certificate issued to a client (or by another CA) cannot reach Raft,
// actor remoting or gossip streams.
package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Trust domain and paths of the identities in certificates' SAN URIs.
const (
	trustDomain = "shardkeeper"
	nodePath    = "/node/"
	clientPath  = "/client/"
)

// NodeURI is the SAN URI naming node id.
func NodeURI(id string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: nodePath + id}
}

// ClientURI is the SAN URI naming a client.
func ClientURI(name string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: clientPath + name}
}

// ErrNotNode is returned for a certificate that is not a node's (wrong role or no node URI).
var ErrNotNode = errors.New("not a node certificate")

// NodeID returns the node id a certificate names, if it is a node certificate: extended key
// usages ServerAuth and ClientAuth, and exactly one SAN URI, a node URI. It does not check the
// issuer (see Verify).
func NodeID(c *x509.Certificate) (string, error) {
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return "", fmt.Errorf("%w: it lacks the ServerAuth and ClientAuth key usages of a node", ErrNotNode)
	}
	if len(c.URIs) != 1 {
		return "", fmt.Errorf("%w: it has %d SAN URIs, a node certificate has one", ErrNotNode, len(c.URIs))
	}
	u := c.URIs[0]
	id, ok := strings.CutPrefix(u.Path, nodePath)
	if u.Scheme != "spiffe" || u.Host != trustDomain || !ok || !ValidNodeID(id) {
		return "", fmt.Errorf("%w: its SAN URI %s is not spiffe://%s%s<node-id>", ErrNotNode, u, trustDomain, nodePath)
	}
	return id, nil
}

// ValidNodeID reports whether id can be carried in a node URI (the node ids the server
// accepts: letters, digits, '-', '_' and '.').
func ValidNodeID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// Verify checks a peer's certificate chain (leaf first, as TLS presents it) against the
// cluster CA and returns the node id it names. want, when not empty, is the node the caller
// means to reach: a certificate of any other node is refused.
func Verify(chain []*x509.Certificate, roots *x509.CertPool, want string) (string, error) {
	if len(chain) == 0 {
		return "", errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	id, err := NodeID(leaf)
	if err != nil {
		return "", fmt.Errorf("peer certificate: %w", err)
	}
	// Both roles along the whole chain: an intermediate limited to one of them cannot make
	// node certificates.
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return "", fmt.Errorf("peer certificate: %w", err)
		}
	}
	if want != "" && id != want {
		return "", fmt.Errorf("peer certificate is node %q's, not %q's", id, want)
	}
	return id, nil
}
