package persistence

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The disk guard's states, on a file system whose free space the test sets: the ballast
// (10 bytes) takes its size from it when present.
func TestDiskGuard(t *testing.T) {
	dir := t.TempDir()
	var avail uint64
	statfs := func(string) (uint64, error) {
		if _, err := os.Stat(filepath.Join(dir, ballastName)); err == nil {
			return avail - 10, nil
		}
		return avail, nil
	}
	check := func(g *DiskGuard, step string, low, ballast bool, why string) {
		t.Helper()
		g.Check()
		_, err := os.Stat(filepath.Join(dir, ballastName))
		if g.Low() != low || (err == nil) != ballast {
			t.Fatalf("%s: low %v ballast %v, want %v %v", step, g.Low(), err == nil, low, ballast)
		}
		if e := g.Err(); (e != nil) != low || (e != nil && !strings.Contains(e.Error(), why)) {
			t.Fatalf("%s: Err() = %v, want one saying %q", step, e, why)
		}
	}
	avail = 100
	g, err := newDiskGuard(dir, 50, 10, slog.New(slog.DiscardHandler), statfs)
	if err != nil {
		t.Fatal(err)
	}
	check(g, "room", false, true, "")
	avail = 55
	check(g, "under the watermark", true, true, "under --disk-min-free")
	avail = 100
	check(g, "space back", false, true, "")
	g.OnDiskFull()
	if !g.Low() {
		t.Fatal("not low after ENOSPC")
	}
	avail = 65
	check(g, "after ENOSPC, no room for the ballast above the watermark", true, false, "the disk filled up")
	avail = 80
	check(g, "room for the ballast again", false, true, "")

	// At start on a full disk the ballast goes, and the node stays low until it is back.
	avail = 40
	g, err = newDiskGuard(dir, 50, 10, slog.New(slog.DiscardHandler), statfs)
	if err != nil {
		t.Fatal(err)
	}
	check(g, "started full", true, false, "under --disk-min-free")
	avail = 65
	check(g, "above the watermark, no room for the ballast", true, false, "the disk filled up")
	avail = 100
	check(g, "recovered", false, true, "")
}
