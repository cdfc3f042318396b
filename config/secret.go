package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinTokenBytes is the length under which a bearer token is logged as weak at start.
const MinTokenBytes = 32

// WeakToken reports whether a configured token is shorter than MinTokenBytes.
func WeakToken(t string) bool { return t != "" && len(t) < MinTokenBytes }

// ReadSecretFile reads the secret file path (what names it in errors: "relayer keys file"):
// a regular file readable by its owner only — one that other users can access is refused,
// since they could read the secret — of at most limit bytes. Errors name the file, never its
// content.
func ReadSecretFile(path, what string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s is not a regular file", what, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s %s is accessible by other users (mode %04o): make it readable by its owner only (chmod 600)", what, path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s: larger than %d bytes", what, path, limit)
	}
	return b, nil
}

// ReadToken reads a bearer token from a token file (see ReadSecretFile): its content without
// surrounding white space, which must not be empty.
func ReadToken(path string) (string, error) {
	b, err := ReadSecretFile(path, "token file", 4096)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", errors.New("the token file is empty")
	}
	return t, nil
}
