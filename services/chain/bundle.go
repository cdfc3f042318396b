package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// Bundle mode (Config.Mode == ModeBundle). Each event is an ANS-104 data item signed by
// Config.ItemSigner, its links naming the item before it (an item's id is the SHA-256 of its
// signature, known once signed, and never changes). Items are packed, in seq order, into
// bundles: one Arweave L1 transaction each (the wrapper), signed by the wallet, tagged with
// the chain, its first and last seq and the previous bundle's wrapper id, so the chain can be
// walked from its head bundle on the L1 API alone.
//
// Storage, besides the L1 mode's:
//
//	b/<first seq %016x>   a bundle: its seq range, the wrapper's header (no data: the data
//	                      is the bundle of its items, rebuilt from their records) until
//	                      final, and what the polls saw of it
//
// A bundle is final once its wrapper is Config.ReorgDepth blocks deep: only then are its
// bytes dropped. Until then the polls keep asking about the newest confirmed wrappers, and
// one a reorg dropped is posted again with the same bytes (confirmed events stay confirmed:
// their items, ids and links do not change, nor does the transparency log over them).
//
// Invariants, after every committed message:
//   - bundles cover 1..meta.BundledSeq without gap or overlap, each holding the items of its
//     range in seq order; an event's item bytes stay in its record until its bundle is
//     final, so any wrapper not final can be rebuilt byte for byte;
//   - the bundles of events 1..meta.FinalSeq are final and have no header; no later one is;
//   - a wrapper is committed before it is posted, and posted again only with the same header
//     and the same rebuilt data; only a wrapper a poll saw dead (unmined past its anchor's
//     validity) is signed again, with the same data, and then every later unconfirmed wrapper
//     too (each names the one before): items are never signed again;
//   - a wrapper is posted only once the one it names was taken by the node (its post
//     answered, or a poll saw it): a bundle is never taken while the one it names is refused.

// The chain modes.
const (
	ModeL1     = "l1"     // one L1 transaction per event
	ModeBundle = "bundle" // events as data items, in bundles
)

// maxOpenBundles bounds the bundles signed and not yet confirmed: each is polled, and an
// expiry signs every later one again.
const maxOpenBundles = 64

// bundleRec is a bundle of the chain.
type bundleRec struct {
	First  int64           `json:"first"`
	Last   int64           `json:"last"`
	PrevTx string          `json:"prev_tx,omitempty"` // the previous bundle's wrapper
	TxID   string          `json:"tx_id"`
	Tx     json.RawMessage `json:"tx,omitempty"` // the wrapper's header, until confirmed
	Status string          `json:"status"`       // signed, posted (taken by the node), confirmed
	// AnchorHeight, ExpiredAt, Mined and Replaced are as for an L1 event's record.
	AnchorHeight int64    `json:"anchor_height"`
	ExpiredAt    int64    `json:"expired_at,omitempty"`
	Mined        bool     `json:"mined,omitempty"`
	Replaced     []string `json:"replaced,omitempty"`
	// Height is the block that mined the wrapper, as the last poll that saw it mined said.
	Height int64 `json:"height,omitempty"`
	// Uploaded: every byte of the wrapper's data reached the node (in the body of its post,
	// or every chunk answered). Until then a bundle is not confirmed, mined or not.
	Uploaded bool `json:"uploaded,omitempty"`
	// The wrappers Replaced are asked about until the height ReplacedUntil (ReorgDepth blocks
	// after the last replacement): one seen mined means the chain forked there — a node
	// that had answered it missing lagged behind another that mined it. Forked lists those.
	ReplacedUntil int64    `json:"replaced_until,omitempty"`
	Forked        []string `json:"forked,omitempty"`
}

// final reports whether b's bytes are dropped: confirmed ReorgDepth deep (or confirmed before
// bytes were kept past confirmation).
func (b bundleRec) final() bool { return b.Status == StatusConfirmed && b.Tx == nil }

func bundleKey(first int64) []byte { return fmt.Appendf(nil, "b/%016x", first) }

// bundleOf returns the bundle holding event seq, if any.
func bundleOf(ctx *actors.Context, seq int64) (bundleRec, bool, error) {
	kvs, err := ctx.List(actors.ListOptions{Start: []byte("b/"), End: bundleKey(seq + 1), Reverse: true, Limit: 1})
	if err != nil || len(kvs) == 0 {
		return bundleRec{}, false, err
	}
	var b bundleRec
	if err := json.Unmarshal(kvs[0].Value, &b); err != nil {
		return b, false, err
	}
	return b, seq <= b.Last, nil
}

// Item is the data item anchoring e (normalized) as event prev.Seq+1 of chain name, signed by
// s: the same data and tags as the L1 mode's transaction (Payload), prev.TxID naming the item
// before it.
func Item(name string, e *Event, prev Link, s ans104.Signer) (*ans104.DataItem, error) {
	data, tags := Payload(name, e, prev)
	return ans104.Build(s, data, ans104.Options{Tags: tags})
}

// wrapperTags are the tags of the L1 transaction of the bundle of events [first, last].
func wrapperTags(name string, first, last int64, prev string) []arweave.Tag {
	tag := func(k, v string) arweave.Tag { return arweave.Tag{Name: []byte(k), Value: []byte(v)} }
	tags := append(ans104.BundleTags(), tag("App-Name", "shardkeeper"), tag("Chain", name),
		tag("First-Seq", strconv.FormatInt(first, 10)), tag("Last-Seq", strconv.FormatInt(last, 10)))
	if prev != "" {
		tags = append(tags, tag("Prev-Bundle", prev))
	}
	return tags
}

// bundleJob is the work of a "bundle" effect: wrap the items of events [First, Last] (new),
// or sign the wrappers of Rewrap again, each naming the one before it.
type bundleJob struct {
	Chain     string
	Prev      string // the wrapper the first names ("" before the first bundle)
	Bundles   []jobBundle
	Quote     quote
	Gen       int
	Wallet    *arweave.Wallet
	MaxReward uint64
	Rewrap    bool
}

type jobBundle struct {
	First, Last int64
	Old         string   // signing again: the dead wrapper's id
	Items       [][]byte // the items' bytes, in seq order
}

// wrapped is the result of a "bundle" effect.
type wrapped struct {
	prepared
	Rewrap   bool          `json:"rewrap,omitempty"`
	Prev     string        `json:"prev,omitempty"`
	Wrappers []wrappedItem `json:"wrappers"`
}

type wrappedItem struct {
	First int64           `json:"first"`
	Last  int64           `json:"last"`
	Old   string          `json:"old,omitempty"`
	Tx    json.RawMessage `json:"tx"` // with its data, to post
}

func (j bundleJob) run(ctx context.Context, gw Gateway) (wrapped, error) {
	w := wrapped{prepared: prepared{Anchor: j.Quote.Anchor, Height: j.Quote.Height, Prices: j.Quote.Prices, ReadAt: j.Quote.At, Gen: j.Gen},
		Rewrap: j.Rewrap, Prev: j.Prev}
	if w.Anchor == nil {
		var err error
		if w.Anchor, err = gw.Anchor(ctx); err != nil {
			return w, err
		}
		if w.Height, err = gw.Height(ctx); err != nil { // after the anchor: at least its height
			return w, err
		}
		w.Prices = map[int]string{}
	}
	prev := j.Prev
	for _, b := range j.Bundles {
		items := make([]*ans104.DataItem, len(b.Items))
		for i, raw := range b.Items {
			it, err := ans104.Parse(raw)
			if err != nil {
				return w, fmt.Errorf("chain %s: the item of event %d: %w", j.Chain, b.First+int64(i), err)
			}
			items[i] = it
		}
		data, err := ans104.EncodeBundle(items)
		if err != nil {
			return w, err
		}
		// Priced by whole chunks, as the network prices data: the quote's prices are reused.
		chunks := arweave.PricedChunks(len(data))
		reward, ok := w.Prices[chunks]
		if !ok {
			if reward, err = gw.Price(ctx, chunks*arweave.MaxChunkSize); err != nil {
				return w, err
			}
			w.Prices[chunks] = reward
		}
		tx := arweave.NewTx(data, wrapperTags(j.Chain, b.First, b.Last, prev))
		tx.LastTx, tx.Reward = w.Anchor, reward
		if err := signCapped(tx, j.Wallet, j.MaxReward); err != nil {
			return w, err
		}
		js, _ := json.Marshal(tx)
		w.Wrappers = append(w.Wrappers, wrappedItem{First: b.First, Last: b.Last, Old: b.Old, Tx: js})
		prev = tx.IDString()
	}
	return w, nil
}

// maybeBundle bundles the next unbundled events when due: a full bundle's worth, or the
// "bundle" alarm fired (force); and the bundle it would name was taken by the node.
func (a *actor) maybeBundle(ctx *actors.Context, m meta, force bool) error {
	unbundled := m.Seq - m.BundledSeq
	if a.bundling || unbundled <= 0 || m.RewrapFrom > 0 || a.cfg.Gateway == nil || ctx.Now().Before(a.retryAt) {
		return nil
	}
	if unbundled < int64(a.cfg.BundleMaxItems) && !force {
		return a.bundleAlarm(ctx)
	}
	open, err := ctx.List(actors.ListOptions{Start: bundleKey(m.ConfirmedSeq + 1), End: []byte("b0"), Limit: maxOpenBundles})
	if err != nil {
		return err
	}
	if len(open) >= maxOpenBundles {
		return nil // a poll confirming one calls again
	}
	if m.BundleTx != "" && !a.taken(ctx, m.BundledSeq) {
		return nil // the bundle it would name is not taken yet: its post's answer calls again
	}
	b := jobBundle{First: m.BundledSeq + 1}
	size := 0
	recs, err := ctx.List(actors.ListOptions{Start: eventKey(b.First), End: []byte("e0"), Limit: a.cfg.BundleMaxItems})
	if err != nil {
		return err
	}
	for _, kv := range recs {
		var r record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return err
		}
		if len(r.Item) == 0 && len(b.Items) == 0 {
			// An event of the L1 mode, before the chain was switched to bundles: the first
			// bundle starts after the last of them, once it is confirmed.
			if r.Status != StatusConfirmed {
				return nil
			}
			// Nothing to keep for a reorg: the L1 mode dropped their bytes when confirmed.
			m.BundledSeq, m.FinalSeq, b.First = r.Seq, r.Seq, r.Seq+1
			store(ctx, metaKey, m)
			continue
		}
		if len(r.Item) == 0 || (len(b.Items) > 0 && size+len(r.Item) > a.cfg.BundleMaxBytes) {
			break
		}
		b.Items, b.Last, size = append(b.Items, r.Item), r.Seq, size+len(r.Item)
	}
	if len(b.Items) == 0 {
		return nil
	}
	return a.startBundle(ctx, bundleJob{Chain: ctx.ID(), Prev: m.BundleTx, Bundles: []jobBundle{b}})
}

// bundleAlarm sets the "bundle" alarm BundleInterval from now unless it is set.
func (a *actor) bundleAlarm(ctx *actors.Context) error {
	if ctx.Now().Before(a.bundleAt) {
		return nil // set by this activation, and not fired yet
	}
	a.bundleAt = ctx.Now().Add(a.cfg.BundleInterval)
	als, err := ctx.Alarms()
	if err != nil {
		return err
	}
	for _, al := range als {
		if al.Name == "bundle" {
			return nil
		}
	}
	return ctx.SetAlarm("bundle", a.bundleAt)
}

// taken reports whether the bundle ending at event last was taken by the node: its post was
// answered, or a poll saw it.
func (a *actor) taken(ctx *actors.Context, last int64) bool {
	b, found, err := bundleOf(ctx, last)
	return err == nil && found && (b.Status != StatusSigned || b.Mined)
}

// startBundle runs job in a "bundle" effect, with the quote when fresh.
func (a *actor) startBundle(ctx *actors.Context, job bundleJob) error {
	job.Gen, job.Wallet, job.MaxReward = a.quoteGen, a.cfg.Wallet, a.cfg.MaxReward
	if !job.Rewrap && a.fresh(ctx.Now()) { // signing again always reads a fresh anchor
		if err := a.renewQuote(ctx); err != nil {
			return err
		}
		job.Quote = a.quote
		job.Quote.Prices = maps.Clone(a.quote.Prices)
	} else {
		job.Quote = quote{At: ctx.Now()}
	}
	a.bundling = true
	gw, timeout := a.cfg.Gateway, a.cfg.CallTimeout
	return ctx.Effect("bundle", func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		w, err := job.run(c, gw)
		if err != nil {
			return nil, err
		}
		return json.Marshal(w)
	})
}

// bundleDone commits the wrappers a "bundle" effect signed, unless the chain moved since it
// began, and posts each once that commits.
func (a *actor) bundleDone(ctx *actors.Context, m meta, r actors.EffectResult) error {
	a.bundling = false
	if r.Err != nil {
		if isFeeTooHigh(r.Err) {
			a.cfg.Metrics.quoteRefused()
		}
		if cause := r.Err.Error(); cause != a.bundleFailure {
			a.bundleFailure = cause
			slog.Warn("chain: preparing a bundle's wrapper failed; trying again at every poll", "chain", ctx.ID(), "error", r.Err)
		}
		a.dropQuote()
		a.retryAt = ctx.Now().Add(a.cfg.PollInterval)
		return ctx.SetAlarm("pump", a.retryAt)
	}
	if a.bundleFailure != "" {
		a.bundleFailure = ""
		slog.Info("chain: a bundle's wrapper prepared again", "chain", ctx.ID())
	}
	var w wrapped
	if err := json.Unmarshal(r.Output, &w); err != nil {
		return err
	}
	a.keepQuote(w.prepared)
	var err error
	if w.Rewrap {
		m, err = a.commitRewrapped(ctx, m, w)
	} else {
		m, err = a.commitBundle(ctx, m, w)
	}
	if err != nil {
		return err
	}
	store(ctx, metaKey, m)
	if a.pollWanted(m) {
		next := ctx.Now().Add(a.cfg.PollInterval)
		if at, due, err := a.pollDue(ctx); err != nil || (due && !at.After(next)) {
			return err
		}
		if err := ctx.SetAlarm("poll", next); err != nil {
			return err
		}
	}
	return a.pump(ctx, m)
}

// commitBundle stores a new bundle and posts its wrapper.
func (a *actor) commitBundle(ctx *actors.Context, m meta, w wrapped) (meta, error) {
	if len(w.Wrappers) != 1 || w.Prev != m.BundleTx || w.Wrappers[0].First != m.BundledSeq+1 || w.Wrappers[0].Last > m.Seq || m.RewrapFrom > 0 {
		return m, nil // the chain moved since: bundle again
	}
	wr := w.Wrappers[0]
	var tx arweave.Tx
	if err := json.Unmarshal(wr.Tx, &tx); err != nil {
		return m, err
	}
	b := bundleRec{First: wr.First, Last: wr.Last, PrevTx: w.Prev, TxID: tx.IDString(), Tx: header(&tx), Status: StatusSigned,
		AnchorHeight: max(w.Height, a.height)}
	store(ctx, bundleKey(b.First), b)
	m.BundledSeq, m.BundleTx, m.UpdatedAt = b.Last, b.TxID, ctx.Now().UnixMilli()
	a.cfg.Metrics.event(eventBundled, int(b.Last-b.First+1))
	return m, a.postBundle(ctx, b.First, &tx)
}

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

// The bundle settings' defaults. DefaultMaxUnconfirmedBundled is MaxUnconfirmed's in bundle
// mode: a bundle waits for a block (two minutes on Arweave) and its confirmations, so at 1,000
// events/s a few hundred thousand events are signed and not yet confirmed.
const (
	DefaultBundleInterval        = 5 * time.Second
	DefaultBundleMaxItems        = 10000
	DefaultBundleMaxBytes        = 8 << 20
	DefaultMaxUnconfirmedBundled = 500_000
)
