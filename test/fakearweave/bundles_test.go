package fakearweave

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// edSigner is an Ed25519 signer from a fixed seed: its items are the same bytes every run.
func edSigner(t *testing.T, seed byte) ans104.Signer {
	t.Helper()
	s, err := ans104.NewEd25519Signer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// item builds a data item carrying data, tags given as name, value, name, value...
func item(t *testing.T, s ans104.Signer, data string, tags ...string) *ans104.DataItem {
	t.Helper()
	var ts []ans104.Tag
	for i := 0; i+1 < len(tags); i += 2 {
		ts = append(ts, ans104.Tag{Name: []byte(tags[i]), Value: []byte(tags[i+1])})
	}
	d, err := ans104.Build(s, []byte(data), ans104.Options{Tags: ts})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func encode(t *testing.T, items ...*ans104.DataItem) []byte {
	t.Helper()
	b, err := ans104.EncodeBundle(items)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bundleTx is a transaction carrying data tagged as a bundle.
func bundleTx(t *testing.T, c *arweave.Client, w *arweave.Wallet, data []byte, tweak func(*arweave.Tx)) *arweave.Tx {
	t.Helper()
	tags := append(ans104.BundleTags(), arweave.Tag{Name: []byte("App-Name"), Value: []byte("shardkeeper")})
	return signedData(t, c, w, data, tags, tweak)
}

func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// The items of a valid bundle are indexed once its data is complete and served by id once it
// is mined, with the bytes of their data, their tags as headers and their place in the
// bundle, as an ar.io gateway serves them; a node's own endpoints still know only the bundle.
func TestBundleItemsServed(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	ctx := context.Background()
	rsa, err := ans104.NewArweaveSigner(w)
	if err != nil {
		t.Fatal(err)
	}
	items := []*ans104.DataItem{
		item(t, edSigner(t, 1), "first event", "Content-Type", "text/plain", "App-Name", "shardkeeper", "Event Seq", "1"),
		item(t, edSigner(t, 2), `{"seq":2}`, "content-type", "application/json"),
		item(t, rsa, "no tags"),
	}
	data := encode(t, items...)
	tx := bundleTx(t, c, w, data, nil)
	post(t, c, tx)
	id := tx.IDString()

	got := f.Items(id)
	if len(got) != len(items) {
		t.Fatalf("%d items indexed, want %d", len(got), len(items))
	}
	for i, it := range got {
		d := items[i]
		if it.ID != d.IDString() || it.Owner != arweave.AddressOf(d.Owner()) || it.SignatureType != int(d.SignatureType()) ||
			!bytes.Equal(data[it.Offset:it.Offset+it.Size], d.Bytes()) || !bytes.Equal(data[it.DataOffset:it.DataOffset+it.DataSize], d.Data()) {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	// Not served before the bundle is mined: a gateway unbundles what is in blocks.
	if resp, _ := get(t, url+"/"+items[0].IDString()); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /{item} of a pending bundle: %d, want 404", resp.StatusCode)
	}
	f.Mine()

	for i, d := range items {
		for _, path := range []string{"/", "/raw/"} {
			resp, body := get(t, url+path+d.IDString())
			h := resp.Header
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, d.Data()) {
				t.Fatalf("GET %s{item %d}: %d %q", path, i, resp.StatusCode, body)
			}
			off, _ := strconv.Atoi(h.Get("X-AR-IO-Root-Data-Offset"))
			itemOff, _ := strconv.Atoi(h.Get("X-AR-IO-Root-Data-Item-Offset"))
			size, _ := strconv.Atoi(h.Get("X-AR-IO-Data-Item-Size"))
			if h.Get("X-AR-IO-Root-Transaction-Id") != id || h.Get("X-AR-IO-Data-Id") != d.IDString() ||
				!bytes.Equal(data[off:off+len(body)], body) || !bytes.Equal(data[itemOff:itemOff+size], d.Bytes()) ||
				h.Get("X-Arweave-Owner-Address") != arweave.AddressOf(d.Owner()) ||
				h.Get("X-Arweave-Signature") != b64.EncodeToString(d.Signature()) ||
				h.Get("X-Arweave-Signature-Type") != strconv.Itoa(int(d.SignatureType())) {
				t.Fatalf("GET %s{item %d}: headers %v", path, i, h)
			}
		}
	}
	resp, _ := get(t, url+"/"+items[0].IDString())
	h := resp.Header
	if h.Get("Content-Type") != "text/plain" || h.Get("X-Arweave-Tag-App-Name") != "shardkeeper" ||
		h.Get("X-Arweave-Tag-Event-Seq") != "1" || h.Get("X-Arweave-Tag-Count") != "3" || h.Get("X-Arweave-Tags-Truncated") != "" {
		t.Fatalf("item 0's headers: %v", h)
	}
	if resp, _ := get(t, url+"/"+items[1].IDString()); resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("item 1: Content-Type %q", resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, url+"/"+items[2].IDString()); resp.Header.Get("Content-Type") != "application/octet-stream" || resp.Header.Get("X-Arweave-Tag-Count") != "" {
		t.Fatalf("item 2 (no tags): %v", resp.Header)
	}
	if resp, body := get(t, url+"/"+items[0].IDString(), "Range", "bytes=0-4"); resp.StatusCode != http.StatusPartialContent || string(body) != "first" {
		t.Fatalf("a range: %d %q", resp.StatusCode, body)
	}
	// The node's endpoints: the bundle is a transaction, an item is not.
	if s, err := c.StatusOf(ctx, items[0].IDString()); !errors.Is(err, arweave.ErrNotFound) {
		t.Fatalf("GET /tx/{item}/status: %+v %v, want 404", s, err)
	}
	if _, err := c.Tx(ctx, items[0].IDString()); !errors.Is(err, arweave.ErrNotFound) {
		t.Fatalf("GET /tx/{item}: %v, want 404", err)
	}
	if s, err := c.StatusOf(ctx, id); err != nil || s.BlockHeight != 1 {
		t.Fatalf("the bundle: %+v %v", s, err)
	}
	if b, err := c.Data(ctx, id); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the bundle's data: %v", err)
	}

	resp, body := get(t, url+"/admin/bundles/"+id)
	var admin struct {
		ID           string `json:"id"`
		Height       int    `json:"height"`
		DataComplete bool   `json:"data_complete"`
		Error        string `json:"error"`
		Items        []struct {
			ID   string `json:"id"`
			Tags []struct{ Name, Value string }
		} `json:"items"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &admin) != nil || admin.ID != id || admin.Height != 1 ||
		!admin.DataComplete || admin.Error != "" || len(admin.Items) != 3 || admin.Items[1].ID != items[1].IDString() ||
		fmt.Sprint(admin.Items[0].Tags) != "[{Content-Type text/plain} {App-Name shardkeeper} {Event Seq 1}]" {
		t.Fatalf("GET /admin/bundles/{id}: %d %s", resp.StatusCode, body)
	}
}

// A bundle larger than a chunk arrives by chunks; the chunk that completes it has it
// unbundled. A header posted after its data's chunks finds them, and is unbundled at once.
func TestBundleByChunks(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	s := edSigner(t, 3)
	var items []*ans104.DataItem
	for i := range 4 {
		items = append(items, item(t, s, strings.Repeat(strconv.Itoa(i), 100<<10), "Content-Type", "text/plain"))
	}
	data := encode(t, items...)
	if len(data) <= arweave.MaxChunkSize {
		t.Fatal("the bundle fits one chunk")
	}
	tx := bundleTx(t, c, w, data, nil)
	post(t, c, tx) // the header, then every chunk
	f.Mine()
	if b, ok := f.Bundle(tx.IDString()); !ok || !b.DataComplete || b.Error != "" || len(b.Items) != 4 {
		t.Fatalf("by chunks: %+v", b)
	}
	if _, body := get(t, url+"/"+items[3].IDString()); !bytes.Equal(body, items[3].Data()) {
		t.Fatal("the last item, by chunks, is not served")
	}

	// The same data under another transaction, its header alone.
	again := bundleTx(t, c, w, data, nil)
	head := *again
	head.Data = nil
	post(t, c, &head)
	if got := f.Items(again.IDString()); len(got) != 4 {
		t.Fatalf("a header whose chunks were there: %d items", len(got))
	}
}

// A bundle whose data is not one, or one holding an item whose signature does not verify, is
// mined as any transaction (a node does not look inside data), but none of its items is
// indexed, and the reason is recorded.
func TestBundleNotIndexed(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	ctx := context.Background()
	good, bad := item(t, edSigner(t, 4), "valid"), item(t, edSigner(t, 5), "will be changed")
	tampered := encode(t, good, bad)
	tampered[len(tampered)-1] ^= 1 // in bad's data: its signature no longer covers it
	for _, tc := range []struct {
		name, why string
		data      []byte
	}{
		{"a tampered item", "item 1: ans104: data item " + bad.IDString() + ": invalid signature", tampered},
		{"not a bundle", "malformed", []byte("not a bundle at all, but tagged as one")},
	} {
		name, data := tc.name, tc.data
		tx := bundleTx(t, c, w, data, nil)
		post(t, c, tx)
		f.Mine()
		if s, err := c.StatusOf(ctx, tx.IDString()); err != nil || s.Pending {
			t.Fatalf("%s: not mined: %+v %v", name, s, err)
		}
		b, ok := f.Bundle(tx.IDString())
		if !ok || !b.DataComplete || b.Error == "" || b.Items != nil || f.Items(tx.IDString()) != nil {
			t.Fatalf("%s: %+v", name, b)
		}
		if !strings.Contains(b.Error, tc.why) {
			t.Fatalf("%s: the reason recorded is %q", name, b.Error)
		}
		resp, body := get(t, url+"/admin/bundles/"+tx.IDString())
		var admin struct {
			Error string `json:"error"`
			Items []any  `json:"items"`
		}
		if json.Unmarshal(body, &admin) != nil || admin.Error != b.Error || len(admin.Items) != 0 {
			t.Fatalf("%s: GET /admin/bundles/{id}: %d %s", name, resp.StatusCode, body)
		}
		if _, body := get(t, url+"/"+tx.IDString()); !bytes.Equal(body, data) {
			t.Fatalf("%s: the transaction's data is not served", name)
		}
	}
	// Not even the valid item of the tampered bundle is served.
	if resp, _ := get(t, url+"/"+good.IDString()); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an item of an invalid bundle: %d, want 404", resp.StatusCode)
	}
	// A transaction without the bundle tags is no bundle, whatever its data.
	plain := signedData(t, c, w, encode(t, good), nil, nil)
	post(t, c, plain)
	f.Mine()
	if _, ok := f.Bundle(plain.IDString()); ok {
		t.Fatal("untagged data taken for a bundle")
	}
	if resp, _ := get(t, url+"/admin/bundles/"+plain.IDString()); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /admin/bundles of an untagged transaction: %d", resp.StatusCode)
	}
	if resp, _ := get(t, url+"/"+good.IDString()); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an item of untagged data: %d, want 404", resp.StatusCode)
	}
}

// An item is served from the first mined bundle holding it; a reorg that takes the bundle's
// block away takes its items with it until a bundle holding them is mined again.
func TestBundleItemsAcrossReorg(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	genesis := blockHash(t, url, 0)
	onGenesis := func(tx *arweave.Tx) { tx.LastTx = genesis }
	a, b := item(t, edSigner(t, 6), "a"), item(t, edSigner(t, 7), "b")
	first, second := bundleTx(t, c, w, encode(t, a), onGenesis), bundleTx(t, c, w, encode(t, b, a), onGenesis)
	root := func(d *ans104.DataItem) string {
		t.Helper()
		resp, _ := get(t, url+"/"+d.IDString())
		if resp.StatusCode == http.StatusNotFound {
			return ""
		}
		return resp.Header.Get("X-AR-IO-Root-Transaction-Id")
	}
	post(t, c, first)
	f.Mine()
	post(t, c, second)
	f.Mine()
	if root(a) != first.IDString() || root(b) != second.IDString() {
		t.Fatalf("served from %q and %q", root(a), root(b))
	}
	f.Reorg(1)
	if root(a) != first.IDString() || root(b) != "" {
		t.Fatalf("after the second bundle's block went: %q and %q", root(a), root(b))
	}
	f.Reorg(2) // blocks 1 and 2
	if root(a) != "" || f.Items(first.IDString()) != nil {
		t.Fatalf("after the first bundle's block went: a from %q", root(a))
	}
	post(t, c, second) // the same bytes again
	f.Mine()
	if root(a) != second.IDString() || root(b) != second.IDString() {
		t.Fatalf("reposted: served from %q and %q", root(a), root(b))
	}
	if got := f.Items(second.IDString()); !slices.EqualFunc(got, []*ans104.DataItem{b, a}, func(it ItemInfo, d *ans104.DataItem) bool { return it.ID == d.IDString() }) {
		t.Fatalf("items %+v", got)
	}
}

// Tags become headers as ar.io makes them: names sanitized, values in Latin-1, at most 100
// (X-Arweave-Tags-Truncated past that).
func TestItemTagHeaders(t *testing.T) {
	for name, want := range map[string]string{"App-Name": "App-Name", "Event Seq": "Event-Seq", "--a..b__c--": "a-b__c", "été": "t", "!!!": ""} {
		if got := tagHeaderName(name); got != want {
			t.Errorf("tagHeaderName(%q) = %q, want %q", name, got, want)
		}
	}
	if got := tagHeaderValue([]byte("café\x00🙂\tok")); got != "caf\xe9\tok" {
		t.Errorf("tagHeaderValue: %q", got)
	}
	f, c, url := start(t)
	var tags []string
	for i := range 101 {
		tags = append(tags, fmt.Sprintf("T%03d", i), "v")
	}
	d := item(t, edSigner(t, 8), "many tags", tags...)
	post(t, c, bundleTx(t, c, wallet(t), encode(t, d), nil))
	f.Mine()
	resp, _ := get(t, url+"/"+d.IDString())
	n := 0
	for k := range resp.Header {
		if strings.HasPrefix(k, "X-Arweave-Tag-T") {
			n++
		}
	}
	if n != 100 || resp.Header.Get("X-Arweave-Tag-Count") != "101" || resp.Header.Get("X-Arweave-Tags-Truncated") != "true" {
		t.Fatalf("%d tag headers, count %q, truncated %q", n, resp.Header.Get("X-Arweave-Tag-Count"), resp.Header.Get("X-Arweave-Tags-Truncated"))
	}
}
