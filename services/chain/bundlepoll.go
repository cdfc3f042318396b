package chain

import (
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
)

// Watching bundles: polling the wrappers posted and not yet final, confirming a bundle
// (and its items) once deep enough, noticing a wrapper dead (never mined, its anchor expired)
// or taken back by a reorg.

// pollBundles asks the gateway about the unconfirmed bundles' wrappers (the oldest
// maxOpenBundles).
func (a *actor) pollBundles(ctx *actors.Context, m meta) error {
	if a.polling {
		return nil
	}
	start := bundleKey(m.ConfirmedSeq + 1)
	if b, found, err := bundleOf(ctx, m.ConfirmedSeq+1); err != nil {
		return err
	} else if found {
		start = bundleKey(b.First)
	}
	from := start
	if m.ReorgFrom > 0 {
		from = bundleKey(m.ReorgFrom) // confirmed bundles a reorg dropped, not yet back
	}
	kvs, err := ctx.List(actors.ListOptions{Start: from, End: []byte("b0"), Limit: maxOpenBundles})
	if err != nil {
		return err
	}
	ids := map[int64]string{}
	for _, kv := range kvs {
		var b bundleRec
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return err
		}
		if b.Status != StatusConfirmed && b.ExpiredAt == 0 {
			ids[b.First] = b.TxID
		}
	}
	// The newest confirmed bundles not final: a reorg drops the newest blocks, so a confirmed
	// wrapper it dropped is among them. Once one was found gone, those just before the
	// oldest found, until one of them is still mined: the reorg's depth.
	end := start
	if m.ReorgFrom > 0 {
		end = bundleKey(m.ReorgFrom)
	}
	// And the oldest ones not final: finalize drops the bytes only of those this poll saw
	// mined deep enough, wherever a reorg may have moved them.
	for _, o := range []actors.ListOptions{
		{Start: bundleKey(m.FinalSeq + 1), End: end, Reverse: true, Limit: reorgProbe},
		{Start: bundleKey(m.FinalSeq + 1), End: end, Limit: finalizeBatch},
	} {
		kvs, err := ctx.List(o)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			var b bundleRec
			if err := json.Unmarshal(kv.Value, &b); err != nil {
				return err
			}
			if b.Status == StatusConfirmed && !b.final() {
				ids[b.First] = b.TxID
			}
		}
	}
	watched, next, err := a.watched(ctx, m)
	if err != nil {
		return err
	}
	maps.Copy(ids, watched)
	if next != m.WatchFrom {
		m.WatchFrom = next
		store(ctx, metaKey, m)
	}
	return a.startPoll(ctx, ids)
}

// Replaced wrappers are polled under negative keys: -(first·maxWatched + their index in the
// bundle's Replaced), the newest maxWatched of each bundle.
const maxWatched = 64

// watched returns the replaced wrappers still watched (by their poll keys), from the lowest
// bundle meta.WatchFrom on (maxOpenBundles bundles), and the lowest bundle still watching
// one (0: none).
func (a *actor) watched(ctx *actors.Context, m meta) (map[int64]string, int64, error) {
	ids := map[int64]string{}
	if m.WatchFrom == 0 {
		return ids, 0, nil
	}
	kvs, err := ctx.List(actors.ListOptions{Start: bundleKey(m.WatchFrom), End: []byte("b0"), Limit: maxOpenBundles})
	if err != nil {
		return nil, 0, err
	}
	var lowest int64
	for _, kv := range kvs {
		var b bundleRec
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return nil, 0, err
		}
		if len(b.Replaced) == 0 || a.height > b.ReplacedUntil {
			continue
		}
		if lowest == 0 {
			lowest = b.First
		}
		for i := max(0, len(b.Replaced)-maxWatched); i < len(b.Replaced); i++ {
			if !slices.Contains(b.Forked, b.Replaced[i]) {
				ids[-(b.First*maxWatched + int64(i%maxWatched))] = b.Replaced[i]
			}
		}
	}
	if lowest == 0 && len(kvs) == maxOpenBundles {
		lowest = m.WatchFrom // more bundles past the window: the next polls look again
	}
	return ids, lowest, nil
}

// observeReplaced records a poll's answer about a replaced wrapper (key as watched gives
// it): mined, the chain forked there.
func (a *actor) observeReplaced(ctx *actors.Context, key int64, st polledState) error {
	first := -key / maxWatched
	b, found, err := load[bundleRec](ctx, bundleKey(first))
	if err != nil || !found || !strings.HasPrefix(st.State, "mined:") || slices.Contains(b.Forked, st.TxID) || !slices.Contains(b.Replaced, st.TxID) {
		return err
	}
	slog.Error("chain: a replaced bundle wrapper was mined: the chain on Arweave has a fork there (an orphan for chain verify)",
		"chain", ctx.ID(), "first", b.First, "last", b.Last, "mined", st.TxID, "current", b.TxID)
	a.cfg.Metrics.event(eventForked, 1)
	b.Forked = append(b.Forked, st.TxID)
	store(ctx, bundleKey(first), b)
	return nil
}

// reorgProbe is how many of the newest confirmed bundles not final each poll asks about.
const reorgProbe = 4

// statusState is a status answer as a polledState's State.
func statusState(s arweave.Status, err error) string {
	switch {
	case errors.Is(err, arweave.ErrNotFound):
		return "missing"
	case err != nil:
		return "unknown"
	case s.Pending:
		return "pending"
	}
	return "mined:" + strconv.FormatInt(s.Confirmations, 10)
}

// bundlesPolled takes a poll's answers about the wrappers (keyed by their first event).
func (a *actor) bundlesPolled(ctx *actors.Context, m meta, p polled) (meta, error) {
	// The newest first: a reorg dropped a suffix of the chain's wrappers, and each must be
	// seen gone (not mined) before an older one dead is signed again with all after it.
	var firsts []int64
	for key, st := range p.States {
		if key < 0 {
			if err := a.observeReplaced(ctx, key, st); err != nil {
				return m, err
			}
			continue
		}
		firsts = append(firsts, key)
	}
	slices.Sort(firsts)
	slices.Reverse(firsts)
	reorged := false
	mined := map[int64]bool{}
	// First the confirmed ones: which did a reorg drop?
	for _, first := range firsts {
		mined[first] = strings.HasPrefix(p.States[first].State, "mined:")
		dropped, err := a.observeConfirmed(ctx, first, p.States[first], p.Height)
		if err != nil {
			return m, err
		}
		if dropped {
			reorged = true
			if m.ReorgFrom == 0 || first < m.ReorgFrom {
				m.ReorgFrom = first
			}
		}
	}
	// Until the reorg's depth is known (a bundle before those it dropped seen still mined),
	// those it dropped wait: posting one again, or signing one again, before the older
	// ones it names are known would break the links.
	bounded, err := a.reorgBounded(ctx, m, mined)
	if err != nil {
		return m, err
	}
	for _, first := range firsts {
		if !bounded && first >= m.ReorgFrom {
			continue
		}
		dead, err := a.observeBundle(ctx, first, p.States[first], p.Height, m.RewrapFrom)
		if err != nil {
			return m, err
		}
		if dead && (m.RewrapFrom == 0 || first < m.RewrapFrom) {
			m.RewrapFrom = first
		}
	}
	if m, err = a.advanceConfirmed(ctx, m); err != nil {
		return m, err
	}
	if m, err = a.settleReorg(ctx, m, bounded); err != nil {
		return m, err
	}
	if !reorged && m.ReorgFrom == 0 {
		if m, err = a.finalize(ctx, m, p.Height, mined); err != nil {
			return m, err
		}
	}
	if m.RewrapFrom == 0 {
		return m, nil
	}
	return a.rewrap(ctx, m)
}

// reorgBounded reports whether the reorg being repaired reached no further than
// meta.ReorgFrom: the bundle before it was seen still mined by this poll (mined, by first
// event), or is final, or there is none.
func (a *actor) reorgBounded(ctx *actors.Context, m meta, mined map[int64]bool) (bool, error) {
	if m.ReorgFrom <= 1 {
		return true, nil
	}
	before, found, err := bundleOf(ctx, m.ReorgFrom-1)
	if err != nil {
		return false, err
	}
	return !found || before.final() || (before.Status == StatusConfirmed && mined[before.First]), nil
}

// settleReorg clears meta.ReorgFrom once the reorg is bounded and every bundle from it up to
// confirmed_seq is confirmed again.
func (a *actor) settleReorg(ctx *actors.Context, m meta, bounded bool) (meta, error) {
	if m.ReorgFrom == 0 || !bounded {
		return m, nil
	}
	kvs, err := ctx.List(actors.ListOptions{Start: bundleKey(m.ReorgFrom), End: bundleKey(m.ConfirmedSeq + 1)})
	if err != nil {
		return m, err
	}
	for _, kv := range kvs {
		var b bundleRec
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return m, err
		}
		if b.Status != StatusConfirmed {
			m.ReorgFrom = b.First
			return m, nil
		}
	}
	m.ReorgFrom = 0
	return m, nil
}

// finalize drops the bytes of the oldest confirmed bundles whose wrappers this poll saw mined
// (mined, by first event) ReorgDepth deep at height (at most finalizeBatch a message): no
// reorg that deep is repaired.
func (a *actor) finalize(ctx *actors.Context, m meta, height int64, mined map[int64]bool) (meta, error) {
	// Bundles made final before bytes were kept past confirmation are skipped over, a few
	// batches a poll; a chain finalizing as it goes stops at its first bundle.
	kvs, err := ctx.List(actors.ListOptions{Start: bundleKey(m.FinalSeq + 1), End: bundleKey(m.ConfirmedSeq + 1), Limit: 4 * finalizeBatch})
	if err != nil {
		return m, err
	}
	dropped := 0
	for _, kv := range kvs {
		var b bundleRec
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return m, err
		}
		if b.Status != StatusConfirmed || b.Last > m.ConfirmedSeq {
			break
		}
		if !b.final() {
			if !mined[b.First] || b.Height <= 0 || height-b.Height+1 < a.cfg.ReorgDepth || dropped == finalizeBatch {
				break
			}
			dropped++
			events, err := ctx.List(actors.ListOptions{Start: eventKey(b.First), End: eventKey(b.Last + 1)})
			if err != nil {
				return m, err
			}
			for _, ev := range events {
				var rec record
				if err := json.Unmarshal(ev.Value, &rec); err != nil {
					return m, err
				}
				rec.Item = nil
				store(ctx, ev.Key, rec)
			}
			b.Tx = nil
			store(ctx, kv.Key, b)
		}
		m.FinalSeq = b.Last
	}
	return m, nil
}

// finalizeBatch bounds the bundles one poll's result makes final.
const finalizeBatch = 16

// observeConfirmed records what the gateway said of the confirmed bundle starting at event
// first, if not final: mined, the block that holds it now; pending or unknown to the node, a
// reorg dropped its block (dropped): it is signed and not taken again, its events staying
// confirmed, and goes through the polls as any bundle not mined.
func (a *actor) observeConfirmed(ctx *actors.Context, first int64, st polledState, height int64) (dropped bool, err error) {
	b, found, err := load[bundleRec](ctx, bundleKey(first))
	if err != nil || !found || b.Status != StatusConfirmed || b.final() || b.TxID != st.TxID {
		return false, err
	}
	switch state := st.State; {
	case strings.HasPrefix(state, "mined:"):
		conf, _ := strconv.ParseInt(strings.TrimPrefix(state, "mined:"), 10, 64)
		if b.Height != height-conf+1 { // mined again in another block, or first seen deep
			b.Height = height - conf + 1
			store(ctx, bundleKey(first), b)
		}
		return false, nil
	case state == "unknown":
		return false, nil
	}
	slog.Warn("chain: a reorg dropped a confirmed bundle; posting it again", "chain", ctx.ID(), "first", b.First, "last", b.Last, "tx", b.TxID, "mined_at", b.Height, "height", height)
	a.cfg.Metrics.event(eventReorged, 1)
	b.Status, b.Mined, b.Height, b.Uploaded = StatusSigned, false, 0, false // the node lost its data too
	store(ctx, bundleKey(first), b)
	return true, nil
}

// observeBundle records what the gateway said of the bundle starting at event first: mined
// deep enough confirms its events; unknown to the node while its anchor is valid is posted
// again (same header, same data); past the anchor's validity unmined, it is dead.
func (a *actor) observeBundle(ctx *actors.Context, first int64, st polledState, height, rewrapFrom int64) (dead bool, err error) {
	b, found, err := load[bundleRec](ctx, bundleKey(first))
	if err != nil || !found || b.Status == StatusConfirmed || b.TxID != st.TxID {
		return false, err
	}
	state := st.State
	conf, _ := strconv.ParseInt(strings.TrimPrefix(state, "mined:"), 10, 64)
	if (state == "pending" || strings.HasPrefix(state, "mined:")) && !b.Uploaded && !a.inflight[b.TxID] {
		// The node has the header, and the data may not have followed (an upload failed, or
		// was cut by a crash): posted again, chunk by chunk.
		if !headerOnly(b) {
			b.Uploaded = true
		} else {
			tx, err := rebuild(ctx, b)
			if err != nil {
				return false, err
			}
			if err := a.uploadBundle(ctx, first, tx); err != nil {
				return false, err
			}
		}
	}
	switch {
	case strings.HasPrefix(state, "mined:"):
		b.Mined, b.Height = true, height-conf+1
		if b.Status == StatusSigned {
			b.Status = StatusPosted
		}
		if conf >= a.cfg.Confirmations && b.Uploaded {
			return false, a.confirmBundle(ctx, b)
		}
		store(ctx, bundleKey(first), b)
	case state == "pending" && b.Mined:
		b.Mined, b.Height = false, 0 // a fork dropped its block: back in a mempool
		store(ctx, bundleKey(first), b)
	case state == "pending" && a.expiredAt(b.AnchorHeight, height):
		return true, a.bundleDead(ctx, b, height)
	case state == "pending" && b.Status == StatusSigned:
		b.Status = StatusPosted
		store(ctx, bundleKey(first), b)
	case state == "missing":
		if b.Mined {
			b.Mined, b.Height = false, 0 // dropped with its block by a fork
			store(ctx, bundleKey(first), b)
		}
		if a.expiredAt(b.AnchorHeight, height) {
			return true, a.bundleDead(ctx, b, height)
		}
		if rewrapFrom > 0 && first > rewrapFrom || a.inflight[b.TxID] || (first > 1 && !a.taken(ctx, first-1)) {
			return false, nil // signed again soon; its post is still under way; or the one it names is not taken
		}
		tx, err := rebuild(ctx, b)
		if err != nil {
			return false, err
		}
		if b.Uploaded {
			b.Uploaded = false // unknown to the node: its data goes again
			store(ctx, bundleKey(first), b)
		}
		a.cfg.Metrics.reposted()
		return false, a.postBundle(ctx, first, tx)
	}
	return false, nil
}

// bundleDead records that a poll saw b's wrapper unmined past its anchor's validity.
func (a *actor) bundleDead(ctx *actors.Context, b bundleRec, height int64) error {
	if b.ExpiredAt == 0 {
		b.ExpiredAt = height
		store(ctx, bundleKey(b.First), b)
	}
	return nil
}

// confirmBundle marks bundle b and its events confirmed (those a reorg had dropped stayed
// confirmed). The items' bytes and the wrapper's header stay until the bundle is final.
func (a *actor) confirmBundle(ctx *actors.Context, b bundleRec) error {
	kvs, err := ctx.List(actors.ListOptions{Start: eventKey(b.First), End: eventKey(b.Last + 1)})
	if err != nil {
		return err
	}
	now := ctx.Now()
	for _, kv := range kvs {
		var rec record
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return err
		}
		if rec.Status == StatusConfirmed {
			continue
		}
		rec.Status, rec.Mined = StatusConfirmed, true
		store(ctx, kv.Key, rec)
		v, _, err := load[version](ctx, versionKey(rec.EntityID, rec.Ver))
		if err != nil {
			return err
		}
		v.Status = StatusConfirmed
		store(ctx, versionKey(rec.EntityID, rec.Ver), v)
		a.cfg.Metrics.confirmed(rec.Accepted, now)
	}
	b.Status, b.Mined = StatusConfirmed, true
	store(ctx, bundleKey(b.First), b)
	return nil
}
