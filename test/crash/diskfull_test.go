package crash

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// A node on a small file system that fills up: writes answer 503 unavailable, nothing
// acknowledged is lost, reads still answer, /readyz says why, and the node takes writes again
// by itself once space returns — with the free-space watermark, when a write meets ENOSPC
// before the watermark is seen (the ballast makes room for it), and when it starts on a full
// disk.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	mnt := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	filler := filepath.Join(mnt, "filler")
	// fill leaves about leave bytes free on the tmpfs (0: none at all).
	fill := func(leave uint64) {
		t.Helper()
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 64<<10)
		for free(t, mnt) > leave {
			n := min(free(t, mnt)-leave, uint64(len(buf)))
			if _, err := f.Write(buf[:n]); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					return
				}
				t.Fatal(err)
			}
		}
	}
	unfill := func() {
		t.Helper()
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}

	bin := proc.Build(t, "./cmd/shardkeeper")
	flags := append(append([]string{}, fastFlags...), "--disk-min-free", "8MiB", "--disk-ballast", "4MiB")
	n := proc.StartReady(t, proc.Config{Bin: bin, Command: []string{"serve"}, DataDir: filepath.Join(mnt, "data"), Flags: flags})
	var acked []string
	var mu sync.Mutex

	// Writes until they are refused for lack of space; returns the refusal's body.
	writeUntilRefused := func(step string) string {
		t.Helper()
		var refusal string
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var once sync.Once
		deadline := time.Now().Add(60 * time.Second)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					select {
					case <-stop:
						return
					default:
					}
					status, body, err := postJSON(n.URL("/v1/nonces"), `{"org_id":"acme"}`)
					switch {
					case err != nil:
						t.Errorf("%s: a write failed without an answer: %v", step, err)
						once.Do(func() { close(stop) })
						return
					case status == http.StatusCreated:
						var r struct{ Nonce string }
						_ = json.Unmarshal(body, &r)
						mu.Lock()
						acked = append(acked, r.Nonce)
						mu.Unlock()
					case status == http.StatusServiceUnavailable && strings.Contains(string(body), "disk"):
						once.Do(func() { refusal = string(body); close(stop) })
						return
					default:
						t.Errorf("%s: write answered %d %s", step, status, body)
						once.Do(func() { close(stop) })
						return
					}
				}
			}()
		}
		wg.Wait()
		if refusal == "" && !t.Failed() {
			t.Fatalf("%s: writes were never refused (%d MiB free)", step, free(t, mnt)>>20)
		}
		return refusal
	}
	checkAcked := func(step string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, nonce := range acked {
			resp, err := http.Get(n.URL("/v1/nonces/" + nonce))
			if err != nil {
				t.Fatalf("%s: read: %v", step, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: acknowledged nonce %s reads %d", step, nonce, resp.StatusCode)
			}
		}
	}
	readyz := func() (int, string) {
		resp, err := http.Get(n.URL("/readyz"))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	recovers := func(step string) {
		t.Helper()
		await.True(t, 30*time.Second, step+": writes accepted again", func() bool {
			status, _, err := postJSON(n.URL("/v1/nonces"), `{"org_id":"acme"}`)
			return err == nil && status == http.StatusCreated
		})
		if status, body := readyz(); status != http.StatusOK {
			t.Fatalf("%s: /readyz %d %s after recovery", step, status, body)
		}
	}

	// The watermark: another process leaves the node 3 MiB above it.
	fill(11 << 20)
	refusal := writeUntilRefused("watermark")
	t.Logf("refused: %s", refusal)
	if status, body := readyz(); status != http.StatusServiceUnavailable || !strings.Contains(body, "disk space low") {
		t.Fatalf("/readyz while the disk is low: %d %s", status, body)
	}
	checkAcked("watermark")
	if !n.Running() {
		t.Fatal("the node exited")
	}
	unfill()
	recovers("watermark")

	// ENOSPC before the watermark: without one, the disk fills to the last byte.
	n.Kill()
	n.RestartWith("--disk-min-free", "0")
	n.WaitReady(30 * time.Second)
	checkAcked("restart")
	await.True(t, 10*time.Second, "the ballast is in place", func() bool {
		_, err := os.Stat(filepath.Join(mnt, "data", "disk-ballast"))
		return err == nil
	})
	fill(256 << 10)
	writeUntilRefused("ENOSPC")
	if !strings.Contains(n.Output(), "disk full (ENOSPC)") {
		t.Error("the node did not log the ENOSPC")
	}
	if !n.Running() {
		t.Fatal("the node exited")
	}
	checkAcked("ENOSPC")
	unfill()
	recovers("ENOSPC")

	// Start-up on a full disk: the node starts, serves reads and says it is low. It frees its
	// ballast to open storage: the one spent on the ENOSPC above must be back first.
	await.True(t, 30*time.Second, "the ballast is in place again", func() bool {
		_, err := os.Stat(filepath.Join(mnt, "data", "disk-ballast"))
		return err == nil
	})
	n.Kill()
	fill(0)
	n.RestartWith()
	await.True(t, 30*time.Second, "the node serves /readyz", func() bool {
		status, body := readyz()
		return status == http.StatusServiceUnavailable && strings.Contains(body, "disk space low")
	})
	checkAcked("full at start")
	unfill()
	recovers("full at start")
	checkAcked("end")
	t.Logf("%d writes acknowledged, every one read back", len(acked))
}

func free(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

func postJSON(url, body string) (int, []byte, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
