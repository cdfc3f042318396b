package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// helperDirEnv makes the test binary, run again as a child process, open the directory it
// names and print the result: a second process on a data directory.
const helperDirEnv = "PERSISTENCE_TEST_OPEN_DIR"

func TestOpenLockedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pebble")
	_, closeFirst := openStore(t, dir)

	// Another process: Pebble's fcntl lock is held.
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenHelperProcess$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	want := "data directory " + dir + " is in use by another process"
	if !strings.Contains(string(out), "open failed: "+want+"\n") {
		t.Errorf("second process got\n%s\nwant %q", out, want)
	}

	// The same process: Pebble refuses a second lock too, and says so the same way.
	_, err = Open(dir, slog.New(slog.DiscardHandler), nil)
	if !errors.Is(err, ErrDirInUse) || err.Error() != want {
		t.Errorf("second Open in the same process: %v, want %q", err, want)
	}

	// Close releases the directory.
	closeFirst()
	s, err := Open(dir, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Other failures are not reported as a directory in use.
func TestOpenFailureNotInUse(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(file, "pebble"), slog.New(slog.DiscardHandler), nil)
	if err == nil || errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open under a regular file: %v", err)
	}
}

// TestOpenHelperProcess is the child of TestOpenLockedDirectory; it does nothing otherwise.
func TestOpenHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("run by TestOpenLockedDirectory")
	}
	s, err := Open(dir, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		fmt.Printf("open failed: %v\n", err)
		return
	}
	_ = s.Close()
	fmt.Println("opened")
}
