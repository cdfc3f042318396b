package pki

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readKey(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, errors.New("key readable by others")
	}
	return os.ReadFile(path)
}

// newCA makes a CA in a temporary directory and returns the directory.
func newCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteCA(dir, "test CA", time.Hour); err != nil {
		t.Fatal(err)
	}
	return dir
}

func issue(t *testing.T, dir string, role Role, name string) Files {
	t.Helper()
	f, err := WriteCert(dir, Request{Role: role, Name: name, Hosts: []string{"127.0.0.1", "localhost"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func load(t *testing.T, f Files) *Peers {
	t.Helper()
	p, err := Load(f, readKey)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// handshake runs a TLS handshake between a client and a server configuration over loopback
// TCP, with one byte each way, and returns the client's and the server's errors.
func handshake(client, server *tls.Config) (cerr, serr error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err, err
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		s := tls.Server(conn, server)
		if err = s.Handshake(); err == nil {
			if _, err = s.Read(make([]byte, 1)); err == nil {
				_, err = s.Write([]byte{2})
			}
		}
		done <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(conn, client)
	// A TLS 1.3 server verifies the client's certificate after its own Finished: the client
	// learns of a refusal on its first read.
	if cerr = c.Handshake(); cerr == nil {
		if _, cerr = c.Write([]byte{1}); cerr == nil {
			_, cerr = c.Read(make([]byte, 1))
		}
	}
	return cerr, <-done
}

func TestNodeCertificates(t *testing.T) {
	dir := newCA(t)
	n1, n2 := load(t, issue(t, dir, RoleNode, "n1")), load(t, issue(t, dir, RoleNode, "n2"))
	if n1.ID() != "n1" || n2.ID() != "n2" {
		t.Fatalf("ids %q %q", n1.ID(), n2.ID())
	}
	if _, serr := handshake(n1.ClientConfig("n2"), n2.ServerConfig()); serr != nil {
		t.Fatalf("node to node: %v", serr)
	}
	if _, serr := handshake(n1.ClientConfig(""), n2.ServerConfig()); serr != nil {
		t.Fatalf("node to any node: %v", serr)
	}
	// The dialer means to reach n3, but n2 answers.
	if cerr, _ := handshake(n1.ClientConfig("n3"), n2.ServerConfig()); cerr == nil || !strings.Contains(cerr.Error(), `node "n2"'s, not "n3"'s`) {
		t.Fatalf("wrong node accepted: %v", cerr)
	}
}

func TestPeersRefuseOtherRolesAndCAs(t *testing.T) {
	dir, other := newCA(t), newCA(t)
	server := load(t, issue(t, dir, RoleNode, "n1"))
	foreignFiles := issue(t, other, RoleNode, "n2")
	foreign := load(t, foreignFiles)
	// An attacker's client: it presents the certificate it has and trusts any server.
	attacker := func(f Files) *tls.Config {
		c := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
		if f.Cert != "" {
			cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
			if err != nil {
				t.Fatal(err)
			}
			c.Certificates = []tls.Certificate{cert}
		}
		return c
	}
	// A client certificate cannot be loaded as a node's…
	cf := issue(t, dir, RoleClient, "ops")
	if _, err := Load(cf, readKey); !errors.Is(err, ErrNotNode) {
		t.Fatalf("client certificate loaded as a node's: %v", err)
	}
	// …nor used to reach a peer port.
	if _, serr := handshake(attacker(cf), server.ServerConfig()); !errors.Is(serr, ErrNotNode) {
		t.Fatalf("client-role certificate accepted: %v", serr)
	}
	// No certificate at all.
	if _, serr := handshake(attacker(Files{}), server.ServerConfig()); serr == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	// A node certificate of another CA, either way.
	if _, serr := handshake(attacker(foreignFiles), server.ServerConfig()); serr == nil || !strings.Contains(serr.Error(), "unknown authority") {
		t.Fatalf("another CA's node accepted by the server: %v", serr)
	}
	if cerr, _ := handshake(server.ClientConfig(""), foreign.ServerConfig()); cerr == nil || !strings.Contains(cerr.Error(), "unknown authority") {
		t.Fatalf("another CA's node accepted by the client: %v", cerr)
	}
	// TLS 1.2 is refused.
	old := server.ClientConfig("")
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	if _, serr := handshake(old, server.ServerConfig()); serr == nil {
		t.Fatal("TLS 1.2 accepted")
	}
}

func TestKeyReadableByOthersIsRefused(t *testing.T) {
	f := issue(t, newCA(t), RoleNode, "n1")
	if err := os.Chmod(f.Key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f, readKey); err == nil {
		t.Fatal("loaded a key readable by others")
	}
}

func TestReload(t *testing.T) {
	dir := newCA(t)
	f := issue(t, dir, RoleNode, "n1")
	p := load(t, f)
	peer := load(t, issue(t, dir, RoleNode, "n2"))
	first := p.Expiry()

	// A new certificate for the same node, as a renewal would write it.
	next := filepath.Join(t.TempDir(), "next")
	if err := os.Mkdir(next, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, caKey := CAFiles(dir)
	for _, c := range []string{ca, caKey} {
		b, _ := os.ReadFile(c)
		if err := os.WriteFile(filepath.Join(next, filepath.Base(c)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	renewed, err := WriteCert(next, Request{Role: RoleNode, Name: "n1", Validity: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Watch(ctx, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	for _, pair := range [][2]string{{renewed.Cert, f.Cert}, {renewed.Key, f.Key}} {
		b, _ := os.ReadFile(pair[0])
		if err := os.WriteFile(pair[1]+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(pair[1]+".tmp", pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.Expiry().After(first.Add(30 * time.Minute)) {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not loaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, serr := handshake(p.ClientConfig("n2"), peer.ServerConfig()); serr != nil {
		t.Fatalf("after reload: %v", serr)
	}

	// A certificate for another node is not taken.
	other := issue(t, next, RoleNode, "n9")
	for _, pair := range [][2]string{{other.Cert, f.Cert}, {other.Key, f.Key}} {
		b, _ := os.ReadFile(pair[0])
		if err := os.WriteFile(pair[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Reload(); err == nil || !strings.Contains(err.Error(), `node "n9"'s; this node is "n1"`) {
		t.Fatalf("reload to another node's certificate: %v", err)
	}
	if p.ID() != "n1" {
		t.Fatal(p.ID())
	}
}
