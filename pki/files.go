package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File names in a directory of TLS material made by WriteCA and WriteCert.
const (
	caFile    = "ca.pem"
	caKeyFile = "ca-key.pem"
)

// CAFiles returns the CA certificate and key paths in dir.
func CAFiles(dir string) (cert, key string) {
	return filepath.Join(dir, caFile), filepath.Join(dir, caKeyFile)
}

// WriteCA creates a CA in dir (ca.pem, and ca-key.pem readable by its owner only). It refuses
// to replace an existing CA: every certificate it issued would stop being trusted.
func WriteCA(dir, name string, validity time.Duration) error {
	certPEM, keyPEM, err := NewCA(name, validity)
	if err != nil {
		return err
	}
	cert, key := CAFiles(dir)
	return writeAll(dir, map[string][]byte{cert: certPEM, key: keyPEM}, key)
}

// WriteCert issues a certificate for req with the CA in dir and writes it as <name>.pem and
// <name>-key.pem (readable by its owner only) beside the CA. It returns the files a node is
// started with.
func WriteCert(dir string, req Request) (Files, error) {
	caPath, caKeyPath := CAFiles(dir)
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return Files{}, fmt.Errorf("CA certificate: %w", err)
	}
	caKeyPEM, err := os.ReadFile(caKeyPath)
	if err != nil {
		return Files{}, fmt.Errorf("CA key: %w", err)
	}
	certPEM, keyPEM, err := Issue(caPEM, caKeyPEM, req)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: caPath, Cert: filepath.Join(dir, req.Name+".pem"), Key: filepath.Join(dir, req.Name+"-key.pem")}
	return f, writeAll(dir, map[string][]byte{f.Cert: certPEM, f.Key: keyPEM}, f.Key)
}

// writeAll writes new files (mode 0644, secret 0600), refusing to overwrite any.
func writeAll(dir string, files map[string][]byte, secret string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for path := range files {
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s exists; remove it first to replace it", path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	var written []string
	for path, b := range files {
		mode := os.FileMode(0o644)
		if path == secret {
			mode = 0o600
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
		if err == nil {
			written = append(written, path)
			_, err = f.Write(b)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			for _, w := range written { // never half a pair: a retry would be refused
				os.Remove(w)
			}
			return err
		}
	}
	return nil
}

// WriteNodes makes a CA in dir (when there is none) and a node certificate for each id, for
// development clusters and tests. Certificates carry the host names given (for tools that
// check them) and are valid for validity.
func WriteNodes(dir string, hosts []string, validity time.Duration, ids ...string) (map[string]Files, error) {
	if cert, _ := CAFiles(dir); !exists(cert) {
		if err := WriteCA(dir, "shardkeeper development CA", validity); err != nil {
			return nil, err
		}
	}
	out := map[string]Files{}
	for _, id := range ids {
		f, err := WriteCert(dir, Request{Role: RoleNode, Name: id, Hosts: hosts, Validity: validity})
		if err != nil {
			return nil, err
		}
		out[id] = f
	}
	return out, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
