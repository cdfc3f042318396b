package fakearweave

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// The fake is also the gateway in front of its node: as an ar.io gateway does, it unbundles
// the ANS-104 bundles it mines and serves their data items by id (GET /{id}, GraphQL). The
// node part looks inside no data: a bundle whose data is not a valid bundle is mined like
// any transaction; only its items go unindexed, as a gateway would leave them.

// bundle is what the gateway knows of a transaction tagged as a bundle.
//
// Invariant: items and parsed are set (and err empty) only once the data is complete, it
// parsed, and every item verified; then every id in items is in Fake.items under this
// bundle's transaction.
type bundle struct {
	indexed bool   // the data was complete and was looked at
	err     string // why the items are not indexed (when indexed)
	items   []ItemInfo
	parsed  []*ans104.DataItem // items[i]'s bytes
}

// ItemInfo is a data item of a bundle, as the gateway indexed it. Offsets count from the
// start of the bundle's data (the L1 transaction's), as ar.io's X-AR-IO-Root-* headers do.
type ItemInfo struct {
	ID            string
	Owner         string // the signer's address: base64url SHA-256 of its public key
	SignatureType int
	Target        string // base64url, empty when none
	Anchor        string // base64url, empty when none
	Tags          []arweave.Tag
	Offset        int // of the item's first byte (its signature type)
	Size          int // of the whole item
	DataOffset    int // of the item's data
	DataSize      int
}

// BundleInfo is what the gateway made of a transaction tagged as a bundle.
type BundleInfo struct {
	ID           string
	Height       int  // mined at; -1 while in the mempool
	DataComplete bool // every byte arrived (in the body or by chunks)
	// Error says why the items are not indexed: the data is not a bundle, or an item does
	// not verify. Empty while the data is incomplete, and when the items are indexed.
	Error string
	Items []ItemInfo // in bundle order, an id given twice listed once
}

// isBundle reports whether tags mark the data as an ANS-104 bundle (Bundle-Format: binary,
// Bundle-Version: 2.0.0), which is what makes a gateway unbundle it.
func isBundle(tags []arweave.Tag) bool {
	var format, version bool
	for _, t := range tags {
		switch string(t.Name) {
		case ans104.BundleFormatTag:
			format = format || string(t.Value) == ans104.BundleFormat
		case ans104.BundleVersionTag:
			version = version || string(t.Value) == ans104.BundleVersion
		}
	}
	return format && version
}

// unbundle parses a bundle's data and verifies every item: any failure leaves the whole
// bundle unindexed, as an ar.io gateway's unbundler gives up on a bundle whose stream does
// not parse or verify. An id given twice is indexed once, at its first place. It holds no
// lock: verifying a large bundle takes a while.
func unbundle(data []byte) *bundle {
	b := &bundle{indexed: true}
	items, err := ans104.ParseBundle(data)
	if err != nil {
		b.err = err.Error()
		return b
	}
	at := 32 + 64*len(items)
	seen := map[string]bool{}
	for i, d := range items {
		if err := d.Verify(); err != nil {
			return &bundle{indexed: true, err: fmt.Sprintf("item %d: %v", i, err)}
		}
		id := d.IDString()
		if !seen[id] {
			seen[id] = true
			head := d.Size() - len(d.Data())
			b.items = append(b.items, ItemInfo{ID: id, Owner: arweave.AddressOf(d.Owner()), SignatureType: int(d.SignatureType()),
				Target: b64.EncodeToString(d.Target()), Anchor: b64.EncodeToString(d.Anchor()), Tags: d.Tags(),
				Offset: at, Size: d.Size(), DataOffset: at + head, DataSize: len(d.Data())})
			b.parsed = append(b.parsed, d)
		}
		at += d.Size()
	}
	return b
}

// index unbundles transaction id's data, if it is a bundle whose data just became complete,
// and indexes its items. Call it without mu, after setting e.data under it; the entry may have
// been dropped meanwhile (then nothing is indexed).
func (f *Fake) index(id string, e *entry, data []byte) {
	if e.bundle == nil || data == nil {
		return
	}
	b := unbundle(data)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.txs[id] != e || e.bundle.indexed {
		return
	}
	e.bundle = b
	for _, it := range b.items {
		f.items[it.ID] = append(f.items[it.ID], id)
	}
}

// unindex takes bundle id's items out of the index. Caller holds mu.
func (f *Fake) unindex(id string, b *bundle) {
	for _, it := range b.items {
		holders := f.items[it.ID]
		for i, h := range holders {
			if h == id {
				holders = append(holders[:i:i], holders[i+1:]...)
				break
			}
		}
		if len(holders) == 0 {
			delete(f.items, it.ID)
		} else {
			f.items[it.ID] = holders
		}
	}
}

// servedItem is a data item as the gateway serves it: from the first mined bundle holding
// it, as a gateway keeps the place it first indexed an item at.
type servedItem struct {
	info   ItemInfo
	item   *ans104.DataItem
	root   string // the bundle's transaction
	height int
	index  int // the bundle's place in its block
}

// served finds item id in a mined bundle: a gateway indexes a bundle's items once the bundle
// is in a block, and forgets them when a reorg takes the block away. Caller holds mu.
func (f *Fake) served(id string) (servedItem, bool) {
	var best servedItem
	found := false
	for _, root := range f.items[id] {
		e := f.txs[root]
		if e.height < 0 {
			continue
		}
		if found && (e.height > best.height || e.height == best.height && e.index > best.index) {
			continue
		}
		for i, it := range e.bundle.items {
			if it.ID == id {
				best = servedItem{info: it, item: e.bundle.parsed[i], root: root, height: e.height, index: e.index}
				found = true
			}
		}
	}
	return best, found
}

// Bundle returns what the gateway made of transaction id, if the fake has it and its tags
// mark it as a bundle.
func (f *Fake) Bundle(id string) (BundleInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.txs[id]
	if !ok || e.bundle == nil {
		return BundleInfo{}, false
	}
	return BundleInfo{ID: id, Height: e.height, DataComplete: e.data != nil || e.tx.DataSize == 0,
		Error: e.bundle.err, Items: append([]ItemInfo(nil), e.bundle.items...)}, true
}

// Items returns the data items indexed from bundle id, in bundle order: none while its data is
// incomplete, or when it is not a valid bundle (see Bundle for why). They are listed from the
// time the data is complete; GET /{item id} serves them once the bundle is mined.
func (f *Fake) Items(bundleID string) []ItemInfo {
	b, _ := f.Bundle(bundleID)
	return b.Items
}

// adminBundle is GET /admin/bundles/{id}: the BundleInfo, tags as UTF-8 text.
func (f *Fake) adminBundle(w http.ResponseWriter, r *http.Request) {
	b, ok := f.Bundle(r.PathValue("id"))
	if !ok {
		http.Error(w, "Not Found.", http.StatusNotFound)
		return
	}
	type tag struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	type item struct {
		ID            string `json:"id"`
		Owner         string `json:"owner"`
		SignatureType int    `json:"signature_type"`
		Target        string `json:"target"`
		Anchor        string `json:"anchor"`
		Tags          []tag  `json:"tags"`
		Offset        int    `json:"offset"`
		Size          int    `json:"size"`
		DataOffset    int    `json:"data_offset"`
		DataSize      int    `json:"data_size"`
	}
	items := []item{}
	for _, it := range b.Items {
		tags := []tag{}
		for _, t := range it.Tags {
			tags = append(tags, tag{string(t.Name), string(t.Value)})
		}
		items = append(items, item{it.ID, it.Owner, it.SignatureType, it.Target, it.Anchor, tags, it.Offset, it.Size, it.DataOffset, it.DataSize})
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": b.ID, "height": b.Height, "data_complete": b.DataComplete,
		"error": b.Error, "items": items})
}

// contentType is what a gateway answers as Content-Type: the first Content-Type tag's value
// (the name in any case), else application/octet-stream.
func contentType(tags []arweave.Tag) string {
	if v, ok := firstTag(tags, "Content-Type"); ok {
		return v
	}
	return "application/octet-stream"
}

func firstTag(tags []arweave.Tag, name string) (string, bool) {
	for _, t := range tags {
		if bytes.EqualFold(t.Name, []byte(name)) {
			return string(t.Value), true
		}
	}
	return "", false
}
