package fakearweave

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// Data is served as an ar.io gateway serves it at GET /{id} and GET /raw/{id}: the bytes,
// with ranges, Content-Type from the first Content-Type tag, and the headers that describe
// what was served. For a data item: X-AR-IO-Root-Transaction-Id (the bundle it is served
// from) and its offsets in the bundle's data. For either kind, the headers an ar.io gateway
// adds when ARWEAVE_TAG_RESPONSE_HEADERS_ENABLED is on (the fake always adds them):
// X-Arweave-Signature, -Owner, -Owner-Address, -Target, -Anchor, -Signature-Type, then
// X-Arweave-Tag-Count and one X-Arweave-Tag-{Name} per tag, within ar.io's defaults of 100
// tags and 8192 bytes (X-Arweave-Tags-Truncated: true past them).

// Header names, as an ar.io gateway spells them.
const (
	hdrDataID             = "X-AR-IO-Data-Id"
	hdrRootTxID           = "X-AR-IO-Root-Transaction-Id"
	hdrRootDataItemOffset = "X-AR-IO-Root-Data-Item-Offset"
	hdrRootDataOffset     = "X-AR-IO-Root-Data-Offset"
	hdrRootParentOffset   = "X-AR-IO-Data-Item-Root-Parent-Offset"
	hdrItemOffset         = "X-AR-IO-Data-Item-Offset"
	hdrItemDataOffset     = "X-AR-IO-Data-Item-Data-Offset"
	hdrItemSize           = "X-AR-IO-Data-Item-Size"
	hdrTagCount           = "X-Arweave-Tag-Count"
	hdrTagsTruncated      = "X-Arweave-Tags-Truncated"
	hdrTagPrefix          = "X-Arweave-Tag-"

	maxTagHeaders     = 100  // ARWEAVE_TAG_RESPONSE_HEADERS_MAX's default
	maxTagHeaderBytes = 8192 // ARWEAVE_TAG_RESPONSE_HEADERS_MAX_BYTES's default
)

// sigFields is what the X-Arweave-* headers describe, of a transaction or a data item.
type sigFields struct {
	signature, owner []byte
	target, anchor   []byte
	sigType          int
	tags             []arweave.Tag
}

// data answers the data base64url (GET /tx/{id}/data: a node's, transactions only).
func (f *Fake) data(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	e, ok := f.txs[r.PathValue("id")]
	var data []byte
	complete := ok && (e.data != nil || e.tx.DataSize == 0)
	if complete {
		data = e.data
	}
	f.mu.Unlock()
	if !complete {
		http.Error(w, "Not Found.", http.StatusNotFound) // unknown, or chunks still missing
		return
	}
	io.WriteString(w, b64.EncodeToString(data))
}

// raw answers GET /{id} and GET /raw/{id}: a transaction's data (mined or not: the node has
// it), else a data item's from a mined bundle. The bytes are written without mu held.
func (f *Fake) raw(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	e, isTx := f.txs[id]
	var (
		data []byte
		s    sigFields
		item servedItem
	)
	found := isTx && (e.data != nil || e.tx.DataSize == 0)
	if found {
		data = e.data
		s = sigFields{signature: e.tx.Signature, owner: e.tx.Owner, target: e.tx.Target, anchor: e.tx.LastTx, sigType: 1, tags: e.tx.Tags}
	} else if !isTx {
		item, found = f.served(id)
	}
	f.mu.Unlock()
	if !found {
		http.Error(w, "Not Found.", http.StatusNotFound) // unknown, or chunks still missing
		return
	}
	h := w.Header()
	h.Set(hdrDataID, id)
	if item.item != nil {
		d := item.item
		data = d.Data()
		s = sigFields{signature: d.Signature(), owner: d.Owner(), target: d.Target(), anchor: d.Anchor(), sigType: int(d.SignatureType()), tags: item.info.Tags}
		h.Set(hdrRootTxID, item.root)
		h.Set(hdrRootDataItemOffset, strconv.Itoa(item.info.Offset))
		h.Set(hdrRootDataOffset, strconv.Itoa(item.info.DataOffset))
		// Bundles are not nested here: the parent is the root, at offset 0.
		h.Set(hdrRootParentOffset, "0")
		h.Set(hdrItemOffset, strconv.Itoa(item.info.Offset))
		h.Set(hdrItemDataOffset, strconv.Itoa(item.info.DataOffset))
		h.Set(hdrItemSize, strconv.Itoa(item.info.Size))
	}
	h.Set("Content-Type", contentType(s.tags))
	if v, ok := firstTag(s.tags, "Content-Encoding"); ok {
		h.Set("Content-Encoding", v)
	}
	signedHeaders(h, s)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// signedHeaders adds the X-Arweave-* headers within the byte budget, the signature's first
// (clients need them more than the tags).
func signedHeaders(h http.Header, s sigFields) {
	used, truncated := 0, false
	add := func(name, value string) bool {
		size := len(name) + 2 + len(value) + 2 // "Name: value\r\n"
		if used+size > maxTagHeaderBytes {
			truncated = true
			return false
		}
		used += size
		h.Add(name, value)
		return true
	}
	for _, kv := range [][2]string{
		{"X-Arweave-Signature", b64.EncodeToString(s.signature)},
		{"X-Arweave-Owner", b64.EncodeToString(s.owner)},
		{"X-Arweave-Owner-Address", arweave.AddressOf(s.owner)},
		{"X-Arweave-Target", b64.EncodeToString(s.target)},
		{"X-Arweave-Anchor", b64.EncodeToString(s.anchor)},
	} {
		if kv[1] != "" {
			add(kv[0], kv[1])
		}
	}
	add("X-Arweave-Signature-Type", strconv.Itoa(s.sigType))
	if len(s.tags) > 0 {
		tags := s.tags
		if len(tags) > maxTagHeaders {
			tags, truncated = tags[:maxTagHeaders], true
		}
		add(hdrTagCount, strconv.Itoa(len(s.tags)))
		for _, t := range tags {
			if name := tagHeaderName(string(t.Name)); name != "" && !add(hdrTagPrefix+name, tagHeaderValue(t.Value)) {
				break
			}
		}
	}
	if truncated {
		h.Set(hdrTagsTruncated, "true")
	}
}

// tagHeaderName makes a tag name a header name as ar.io does: every character but letters,
// digits, '-' and '_' becomes '-', runs of '-' become one, none at either end, 128 at most.
func tagHeaderName(name string) string {
	var b []byte
	for _, r := range name {
		ok := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_'
		switch {
		case ok:
			b = append(b, byte(r))
		case len(b) > 0 && b[len(b)-1] != '-':
			b = append(b, '-')
		}
	}
	for len(b) > 0 && b[len(b)-1] == '-' {
		b = b[:len(b)-1]
	}
	return string(b[:min(len(b), 128)])
}

// tagHeaderValue makes a tag value (UTF-8 text) a header value as ar.io does: tabs and
// visible Latin-1 characters kept (sent as one byte each, as Node writes them), the others
// dropped, 4096 at most.
func tagHeaderValue(v []byte) string {
	var b []byte
	for len(v) > 0 && len(b) < 4096 {
		r, n := utf8.DecodeRune(v)
		v = v[n:]
		if r == '\t' || r >= 0x20 && r <= 0xff && r != 0x7f {
			b = append(b, byte(r))
		}
	}
	return string(b)
}
