package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrDiskLow is returned for writes refused because the data directory's file system is
// (nearly) full.
var ErrDiskLow = errors.New("disk space low")

// DiskGuard keeps a node from filling its disk. Below MinFree free bytes the node is low:
// writes are refused before they reach Raft (Err), followers refuse to grow their logs, and
// the node says so in /readyz; it stops being low by itself once space returns.
//
// The watermark is the first defense. The second is a ballast file of BallastSize bytes in
// the data directory: should a write meet ENOSPC anyway (something else filled the disk
// faster than the guard looked), Pebble's file system wrapper calls OnDiskFull, which
// deletes the ballast and marks the node low; Pebble then retries the write once, into the
// space freed. Pebble cannot survive a failed log write (it exits), so the ballast is what
// keeps the process alive. It is recreated once there is room for it above the watermark.
//
// At start, a node whose disk is already full deletes its ballast before storage opens, so
// that opening (which writes) can finish and the node can report its state.
type DiskGuard struct {
	dir         string
	minFree     uint64
	ballast     string
	ballastSize uint64
	logger      *slog.Logger
	statfs      func(dir string) (uint64, error) // free bytes; freeBytes but in tests

	low  atomic.Bool
	free atomic.Uint64
	// mu serializes Check and OnDiskFull, so that a Check under way cannot undo an ENOSPC.
	mu sync.Mutex
	// enospc is set when a write met ENOSPC (or the ballast went at start): the node stays
	// low until the ballast is back. Guarded by mu.
	enospc bool
	// ballastFailed notes that recreating the ballast failed, to log it once. Guarded by mu.
	ballastFailed bool
}

// ballastName is the ballast file, in the data directory.
const ballastName = "disk-ballast"

// NewDiskGuard measures dir's file system once (deleting the ballast if the disk is full,
// see DiskGuard). minFree 0 disables the watermark; ballastSize 0 keeps no ballast.
func NewDiskGuard(dir string, minFree, ballastSize uint64, logger *slog.Logger) (*DiskGuard, error) {
	return newDiskGuard(dir, minFree, ballastSize, logger, freeBytes)
}

func newDiskGuard(dir string, minFree, ballastSize uint64, logger *slog.Logger, statfs func(string) (uint64, error)) (*DiskGuard, error) {
	g := &DiskGuard{dir: dir, minFree: minFree, ballast: filepath.Join(dir, ballastName), ballastSize: ballastSize, logger: logger, statfs: statfs}
	free, err := statfs(dir)
	if err != nil {
		return nil, err
	}
	if free < minFree || ballastSize == 0 {
		if err := os.Remove(g.ballast); err == nil && ballastSize > 0 {
			logger.Warn("disk space low at start: ballast deleted so that storage can open", "free_bytes", free, "min_free_bytes", minFree)
			g.enospc = true
		}
	}
	g.Check()
	return g, nil
}

// Low reports whether the node refuses writes for lack of space.
func (g *DiskGuard) Low() bool { return g.low.Load() }

// Free is the free space last measured, in bytes.
func (g *DiskGuard) Free() uint64 { return g.free.Load() }

// Err is nil while writes are allowed, else an error wrapping ErrDiskLow with the figures.
func (g *DiskGuard) Err() error {
	if !g.low.Load() {
		return nil
	}
	free := g.free.Load()
	if free >= g.minFree {
		return fmt.Errorf("%w: the disk filled up; writes are refused until there is room for the ballast again (%d MiB free, --disk-min-free %d MiB, --disk-ballast %d MiB)",
			ErrDiskLow, free>>20, g.minFree>>20, g.ballastSize>>20)
	}
	return fmt.Errorf("%w: %d MiB free in the data directory, under --disk-min-free %d MiB; writes are refused until space returns",
		ErrDiskLow, free>>20, g.minFree>>20)
}

// FS wraps fs so that an ENOSPC of Pebble calls OnDiskFull before its one retry.
func (g *DiskGuard) FS(fs vfs.FS) vfs.FS { return vfs.OnDiskFull(fs, g.OnDiskFull) }

// OnDiskFull frees the ballast and marks the node low: a write met ENOSPC.
func (g *DiskGuard) OnDiskFull() {
	g.mu.Lock()
	defer g.mu.Unlock()
	removed := os.Remove(g.ballast) == nil
	g.logger.Error("disk full (ENOSPC): writes refused", "ballast_deleted", removed)
	g.enospc = true
	g.set(true)
}

// Run checks the free space every interval until stop is closed.
func (g *DiskGuard) Run(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.Check()
		}
	}
}

// Check measures the free space, recreates a missing ballast when there is room for it
// above the watermark, and updates the state.
func (g *DiskGuard) Check() {
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := g.statfs(g.dir)
	if err != nil {
		g.logger.Warn("cannot measure the free disk space", "error", err)
		return
	}
	_, berr := os.Stat(g.ballast)
	present := berr == nil
	if g.ballastSize > 0 && !present && free >= g.minFree+2*g.ballastSize {
		err := writeBallast(g.ballast, g.ballastSize)
		switch {
		case err != nil && !g.ballastFailed:
			g.logger.Warn("cannot create the disk ballast", "error", err)
		case err == nil && g.ballastFailed:
			g.logger.Info("disk ballast created")
		}
		g.ballastFailed, present = err != nil, err == nil
		if free, err = g.statfs(g.dir); err != nil {
			return
		}
	}
	// After an ENOSPC the node stays low until the ballast is back (or, without one, until
	// the watermark is cleared).
	if g.enospc && (present || g.ballastSize == 0) && free >= g.minFree {
		g.enospc = false
	}
	g.free.Store(free)
	g.set(free < g.minFree || g.enospc)
}

func (g *DiskGuard) set(low bool) {
	if g.low.Swap(low) == low {
		return
	}
	if low {
		g.logger.Error("disk space low: refusing writes", "free_bytes", g.free.Load(), "min_free_bytes", g.minFree)
	} else {
		g.logger.Info("disk space back: writes accepted again", "free_bytes", g.free.Load())
	}
}

// writeBallast writes size bytes of zeros to path (really written, so the space is taken,
// unlike a sparse file), then renames it into place so that a partial ballast never counts.
func writeBallast(path string, size uint64) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, uint64(len(buf)))
		if _, err = f.Write(buf[:n]); err != nil {
			break
		}
		left -= n
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// freeBytes is the space available to this (unprivileged) process on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
