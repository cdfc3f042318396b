package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// startProfiles starts a CPU profile and an allocation profile of every node (o.profileFrom)
// covering the measured time of a run that is starting: after the warm-up, for the duration
// less half a second. The returned function waits for them, writes each to
// o.profile/<name>-node<i>.pprof (CPU) and <name>-allocs-node<i>.pprof (what the measured
// time allocated), the load generator's own CPU profile (<name>-loadgen.pprof) and the run's
// figures beside them (<name>.json: what bench/cmd/skbudget divides by).
func startProfiles(ctx context.Context, o options, name string) func(opsPerS float64) error {
	name = strings.NewReplacer(" ", "_", "/", "_", ",", "").Replace(name)
	seconds := max(int((o.duration-500*time.Millisecond)/time.Second), 1)
	var wg sync.WaitGroup
	errs := make([]error, 2*len(o.profileFrom))
	for i, base := range o.profileFrom {
		for j, kind := range []struct{ path, infix string }{{"profile", ""}, {"allocs", "-allocs"}} {
			wg.Go(func() {
				if errs[2*i+j] = sleep(ctx, o.warmup); errs[2*i+j] != nil {
					return
				}
				errs[2*i+j] = fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", base, kind.path, seconds),
					filepath.Join(o.profile, fmt.Sprintf("%s%s-node%d.pprof", name, kind.infix, i+1)))
			})
		}
	}
	wg.Go(func() {
		if sleep(ctx, o.warmup) != nil {
			return
		}
		if err := profileSelf(ctx, filepath.Join(o.profile, name+"-loadgen.pprof"), time.Duration(seconds)*time.Second); err != nil {
			logf("  no profile of the load generator: %v", err)
		}
	})
	return func(opsPerS float64) error {
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("profile %s: %w", name, err)
		}
		b, _ := json.MarshalIndent(map[string]any{"ops_per_s": opsPerS, "seconds": seconds, "nodes": len(o.profileFrom)}, "", "  ")
		logf("  CPU and allocation profiles of the %d node(s) for %d s in %s", len(o.profileFrom), seconds, o.profile)
		return os.WriteFile(filepath.Join(o.profile, name+".json"), b, 0o644)
	}
}

// sleep waits d, or returns ctx's error if it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// profileSelf writes a CPU profile of this process for d (less if ctx ends first) to path.
func profileSelf(ctx context.Context, path string, d time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	_ = sleep(ctx, d)
	pprof.StopCPUProfile()
	return f.Close()
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, b)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
