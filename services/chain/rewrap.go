package chain

import (
	"encoding/json"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
)

// Wrapping again: a bundle whose wrapper is dead gets a new wrapper for the same items
// (the same ids and links), and the bundles after it are wrapped again on it.

// rewrap signs again, once every wrapper from meta.RewrapFrom on was seen mined or dead, the
// dead one and every later unconfirmed wrapper not mined (each names the one before it: all
// change), in one "bundle" effect, with a fresh anchor. Until then nothing new is bundled.
func (a *actor) rewrap(ctx *actors.Context, m meta) (meta, error) {
	kvs, err := ctx.List(actors.ListOptions{Start: bundleKey(m.RewrapFrom), End: []byte("b0")})
	if err != nil {
		return m, err
	}
	var job bundleJob
	for i, kv := range kvs {
		var b bundleRec
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return m, err
		}
		if i == 0 && b.ExpiredAt == 0 && !b.Mined && b.Status != StatusConfirmed {
			m.RewrapFrom = 0 // the node had it after all
			return m, nil
		}
		if b.Mined || b.Status == StatusConfirmed {
			if i == 0 {
				m.RewrapFrom = 0
				return m, nil
			}
			// Mined after a dead one: it names a wrapper that never will be. Nothing mends a
			// mined transaction; the walk breaks there, and verify says so.
			a.cfg.Metrics.event(eventBroken, 1)
			break
		}
		if b.ExpiredAt == 0 {
			return m, nil // may still be mined: the polls ask again
		}
		items, err := bundleItems(ctx, b)
		if err != nil {
			return m, err
		}
		job.Bundles = append(job.Bundles, jobBundle{First: b.First, Last: b.Last, Old: b.TxID, Items: items})
		if i == 0 {
			job.Prev = b.PrevTx
		}
	}
	if a.bundling || len(job.Bundles) == 0 {
		return m, nil
	}
	job.Chain, job.Rewrap = ctx.ID(), true
	return m, a.startBundle(ctx, job)
}

// commitRewrapped stores the wrappers signed again, each replacing its dead one, and posts
// them; unless the chain moved since.
func (a *actor) commitRewrapped(ctx *actors.Context, m meta, w wrapped) (meta, error) {
	if len(w.Wrappers) == 0 || w.Wrappers[0].First != m.RewrapFrom {
		return m, nil
	}
	bs := make([]bundleRec, len(w.Wrappers))
	for i, wr := range w.Wrappers {
		b, found, err := load[bundleRec](ctx, bundleKey(wr.First))
		if err != nil || !found || b.TxID != wr.Old || b.Mined || b.Status == StatusConfirmed || (i == 0 && b.PrevTx != w.Prev) {
			return m, err
		}
		bs[i] = b
	}
	for i, wr := range w.Wrappers {
		var tx arweave.Tx
		if err := json.Unmarshal(wr.Tx, &tx); err != nil {
			return m, err
		}
		b := bs[i]
		b.Replaced = append(b.Replaced, b.TxID)
		b.ReplacedUntil = max(w.Height, a.height) + a.cfg.ReorgDepth
		b.TxID, b.Tx, b.Status, b.AnchorHeight, b.ExpiredAt = tx.IDString(), header(&tx), StatusSigned, max(w.Height, a.height), 0
		b.Uploaded = false // a new transaction: its data goes again
		if i > 0 {
			b.PrevTx = bs[i-1].TxID
		}
		bs[i] = b
		store(ctx, bundleKey(b.First), b)
		if b.Last == m.BundledSeq {
			m.BundleTx = b.TxID
		}
		if i == 0 { // the others once the one each names is taken (wrapperPosted)
			if err := a.postBundle(ctx, b.First, &tx); err != nil {
				return m, err
			}
		}
	}
	a.cfg.Metrics.event(eventRewrapped, len(w.Wrappers))
	if m.WatchFrom == 0 || w.Wrappers[0].First < m.WatchFrom {
		m.WatchFrom = w.Wrappers[0].First
	}
	m.RewrapFrom = 0
	return m, nil
}
