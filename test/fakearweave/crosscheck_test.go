package fakearweave

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// The live cross-check with the ecosystem's own code (make arweave-crosscheck): transactions
// signed here are taken by arlocal and read back and verified by arweave-js, and transactions
// built, signed and uploaded by arweave-js are taken by this fake node.

func TestCrossCheckOurTransactionsOnArlocal(t *testing.T) {
	RequireCrossCheck(t)
	arl := StartArlocal(t)
	url := arl.URL
	c := arweave.NewClient(url, nil)
	w := wallet(t)
	ctx := context.Background()
	arl.Mint(t, w.Address())
	var err error
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
		if err := arl.Mine(); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Verified   bool       `json:"verified"`
			DataSize   int        `json:"data_size"`
			DataSHA256 string     `json:"data_sha256"`
			Tags       [][]string `json:"tags"`
		}
		if err := json.Unmarshal(Node(t, "read.mjs", url, tx.IDString()), &got); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if !got.Verified || got.DataSize != size || got.DataSHA256 != hex.EncodeToString(sum[:]) || fmt.Sprint(got.Tags) != "[[App-Name shardkeeper] [Seq 7]]" {
			t.Fatalf("arweave-js read back %+v", got)
		}
	}
}

func TestCrossCheckArweaveJSOnTheFake(t *testing.T) {
	RequireCrossCheck(t)
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
		if err := json.Unmarshal(Node(t, "post.mjs", srv.URL, fmt.Sprint(size)), &got); err != nil {
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
