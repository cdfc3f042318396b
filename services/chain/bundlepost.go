package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// Posting a bundle: its wrapper's header and then its data (in the body, or by chunks),
// each post an effect of the same signed bytes, and what the gateway's answers do to it. A
// wrapper's data is never stored: it is rebuilt from its items' records.

// header is tx's JSON without its data.
func header(tx *arweave.Tx) json.RawMessage {
	h := *tx
	h.Data = nil
	js, _ := json.Marshal(&h)
	return js
}

// postBundle posts the wrapper of the bundle starting at event first (after this message
// commits): its header (with the data when it is one chunk); once taken, its data follows
// (uploadBundle). tx is kept for that until the post's answer.
func (a *actor) postBundle(ctx *actors.Context, first int64, tx *arweave.Tx) error {
	if a.inflight == nil {
		a.inflight = map[string]bool{}
	}
	if a.posting == nil {
		a.posting = map[string]*arweave.Tx{}
	}
	a.inflight[tx.IDString()], a.posting[tx.IDString()] = true, tx
	gw, timeout := a.cfg.Gateway, a.cfg.CallTimeout
	return ctx.Effect("wrap:"+strconv.FormatInt(first, 10)+":"+tx.IDString(), func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		return nil, gw.PostHeader(c, tx)
	})
}

// uploadBundle posts the data of the wrapper tx of the bundle starting at event first, chunk
// by chunk, unless an upload of it is under way. The node has its header.
func (a *actor) uploadBundle(ctx *actors.Context, first int64, tx *arweave.Tx) error {
	if a.uploading == nil {
		a.uploading = map[string]bool{}
	}
	if a.uploading[tx.IDString()] {
		return nil
	}
	a.uploading[tx.IDString()] = true
	gw := a.cfg.Gateway
	// Each chunk's own timeout: a bundle of 8 MiB is 32 of them.
	timeout := a.cfg.CallTimeout * time.Duration(max(1, arweave.PricedChunks(len(tx.Data))))
	return ctx.Effect("data:"+strconv.FormatInt(first, 10)+":"+tx.IDString(), func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		return nil, gw.PostChunks(c, tx)
	})
}

// dataPosted takes an upload's answer: the bundle's data is at the node. A failed one is
// tried again by the polls (the node has the header: pending or mined, not uploaded).
func (a *actor) dataPosted(ctx *actors.Context, m meta, r actors.EffectResult) error {
	firstStr, txID, _ := strings.Cut(strings.TrimPrefix(r.Name, "data:"), ":")
	first, _ := strconv.ParseInt(firstStr, 10, 64)
	delete(a.uploading, txID)
	if r.Err != nil {
		return nil
	}
	b, found, err := load[bundleRec](ctx, bundleKey(first))
	if err != nil || !found || b.TxID != txID || b.Uploaded {
		return err
	}
	b.Uploaded = true
	store(ctx, bundleKey(first), b)
	return nil
}

// headerOnly reports whether wrapper b's data goes by chunks, after its header.
func headerOnly(b bundleRec) bool {
	var h struct {
		DataSize string `json:"data_size"`
	}
	_ = json.Unmarshal(b.Tx, &h)
	size, _ := strconv.Atoi(h.DataSize)
	return size > arweave.MaxChunkSize
}

// wrapperPosted takes a wrapper post's answer: taken, the bundle is posted, and the next
// bundle, which names it, may go.
func (a *actor) wrapperPosted(ctx *actors.Context, m meta, r actors.EffectResult) error {
	firstStr, txID, _ := strings.Cut(strings.TrimPrefix(r.Name, "wrap:"), ":")
	first, _ := strconv.ParseInt(firstStr, 10, 64)
	posted := a.posting[txID]
	delete(a.inflight, txID)
	delete(a.posting, txID)
	if errors.Is(r.Err, arweave.ErrRejected) {
		a.dropQuote()
	}
	b, found, err := load[bundleRec](ctx, bundleKey(first))
	if err != nil {
		return err
	}
	if found && arweave.InvalidAnchor(r.Err) && b.TxID == txID && !b.Mined && b.Status == StatusSigned && a.height > b.AnchorHeight {
		// The node refuses the wrapper's anchor though it is past the anchor's height: the
		// block is not on the chain the node follows (a reorg dropped it), and posted again
		// the wrapper would be refused again: it is dead, and signed again with every later
		// one. (A node behind the anchor may just not know the block yet: the polls go on.)
		if err := a.bundleDead(ctx, b, max(a.height, b.AnchorHeight+1)); err != nil {
			return err
		}
		if m.RewrapFrom == 0 || first < m.RewrapFrom {
			m.RewrapFrom = first
		}
		if m, err = a.rewrap(ctx, m); err != nil {
			return err
		}
		store(ctx, metaKey, m)
	}
	if found && r.Err == nil && b.TxID == txID && !b.Uploaded {
		if !headerOnly(b) {
			b.Uploaded = true // in the post's body
			store(ctx, bundleKey(first), b)
		} else if posted != nil {
			if err := a.uploadBundle(ctx, first, posted); err != nil {
				return err
			}
		}
	}
	if found && r.Err == nil && b.TxID == txID && b.Status == StatusSigned {
		b.Status = StatusPosted
		store(ctx, bundleKey(first), b)
		// The next bundle, signed again after this one and waiting for it to be taken.
		next, found, err := load[bundleRec](ctx, bundleKey(b.Last+1))
		if err != nil {
			return err
		}
		if found && next.Status == StatusSigned && !next.Mined && !a.inflight[next.TxID] {
			tx, err := rebuild(ctx, next)
			if err != nil {
				return err
			}
			if err := a.postBundle(ctx, next.First, tx); err != nil {
				return err
			}
		}
	}
	return a.pump(ctx, m)
}

// rebuild is the wrapper of bundle b with its data: the bundle of its events' items.
func rebuild(ctx *actors.Context, b bundleRec) (*arweave.Tx, error) {
	var tx arweave.Tx
	if err := json.Unmarshal(b.Tx, &tx); err != nil {
		return nil, err
	}
	items, err := bundleItems(ctx, b)
	if err != nil {
		return nil, err
	}
	parsed := make([]*ans104.DataItem, len(items))
	for i, raw := range items {
		if parsed[i], err = ans104.Parse(raw); err != nil {
			return nil, err
		}
	}
	if tx.Data, err = ans104.EncodeBundle(parsed); err != nil {
		return nil, err
	}
	if len(tx.Data) != tx.DataSize {
		return nil, fmt.Errorf("chain %s: bundle %d-%d rebuilt to %d bytes, its wrapper says %d", ctx.ID(), b.First, b.Last, len(tx.Data), tx.DataSize)
	}
	return &tx, nil
}

// bundleItems lists the item bytes of bundle b's events.
func bundleItems(ctx *actors.Context, b bundleRec) ([][]byte, error) {
	kvs, err := ctx.List(actors.ListOptions{Start: eventKey(b.First), End: eventKey(b.Last + 1)})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(kvs))
	for _, kv := range kvs {
		var r record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, err
		}
		if len(r.Item) == 0 {
			return nil, fmt.Errorf("chain %s: event %d holds no item to bundle", ctx.ID(), r.Seq)
		}
		out = append(out, r.Item)
	}
	if int64(len(out)) != b.Last-b.First+1 {
		return nil, fmt.Errorf("chain %s: bundle %d-%d holds %d events", ctx.ID(), b.First, b.Last, len(out))
	}
	return out, nil
}
