package fakearweave

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// The live cross-check with the ecosystem's own code (make arweave-crosscheck; needs Node and
// the packages of crosscheck/): transactions signed here are taken by arlocal and read back
// and verified by arweave-js, and transactions built, signed and uploaded by arweave-js are
// taken by this fake node.
func crossCheck(t *testing.T) {
	if os.Getenv("SHARDKEEPER_ARWEAVE_CROSSCHECK") == "" {
		t.Skip("set SHARDKEEPER_ARWEAVE_CROSSCHECK=1 (make arweave-crosscheck)")
	}
	if _, err := os.Stat("crosscheck/node_modules"); err != nil {
		t.Fatal("crosscheck/node_modules is missing: run npm ci in test/fakearweave/crosscheck")
	}
}

func node(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %v: %v\n%s", args, err, stderr)
	}
	return out
}

func TestCrossCheckOurTransactionsOnArlocal(t *testing.T) {
	crossCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", "crosscheck/arlocal.mjs", fmt.Sprint(port))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := arweave.NewClient(url, nil)
	w := wallet(t)
	ctx := context.Background()
	if resp, err := http.Get(url + "/mint/" + w.Address() + "/100000000000000000"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("mint: %v %v", resp, err)
	}
	for _, size := range []int{1000, 600 << 10} {
		data := bytes.Repeat([]byte("shardkeeper"), size/11+1)[:size]
		tx := arweave.NewTx(data, []arweave.Tag{{Name: []byte("App-Name"), Value: []byte("shardkeeper")}, {Name: []byte("Seq"), Value: []byte("7")}})
		if tx.LastTx, err = c.Anchor(ctx); err != nil {
			t.Fatal(err)
		}
		if tx.Reward, err = c.Price(ctx, size); err != nil {
			t.Fatal(err)
		}
		if err := tx.Sign(w); err != nil {
			t.Fatal(err)
		}
		if err := c.Post(ctx, tx); err != nil {
			t.Fatalf("arlocal refused our %d-byte transaction: %v", size, err)
		}
		if resp, err := http.Get(url + "/mine"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("mine: %v %v", resp, err)
		}
		var got struct {
			Verified   bool       `json:"verified"`
			DataSize   int        `json:"data_size"`
			DataSHA256 string     `json:"data_sha256"`
			Tags       [][]string `json:"tags"`
		}
		if err := json.Unmarshal(node(t, "crosscheck/read.mjs", url, tx.IDString()), &got); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if !got.Verified || got.DataSize != size || got.DataSHA256 != hex.EncodeToString(sum[:]) || fmt.Sprint(got.Tags) != "[[App-Name shardkeeper] [Seq 7]]" {
			t.Fatalf("arweave-js read back %+v", got)
		}
	}
}

func TestCrossCheckArweaveJSOnTheFake(t *testing.T) {
	crossCheck(t)
	f := New(Config{BlockInterval: 50 * time.Millisecond})
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer f.Close()
	for _, size := range []int{1000, 600 << 10} {
		var got struct {
			ID         string `json:"id"`
			Status     int    `json:"status"`
			DataSHA256 string `json:"data_sha256"`
		}
		if err := json.Unmarshal(node(t, "crosscheck/post.mjs", srv.URL, fmt.Sprint(size)), &got); err != nil {
			t.Fatal(err)
		}
		if got.Status != 200 {
			t.Fatalf("the fake refused arweave-js's %d-byte transaction: %d", size, got.Status)
		}
		resp, err := http.Get(srv.URL + "/" + got.ID)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		sum := sha256.Sum256(buf.Bytes())
		if hex.EncodeToString(sum[:]) != got.DataSHA256 {
			t.Fatalf("%d bytes: the fake holds other data (%d bytes)", size, buf.Len())
		}
	}
}
