package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
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

// The bundle settings' defaults. DefaultMaxUnconfirmedBundled is MaxUnconfirmed's in bundle
// mode: a bundle waits for a block (two minutes on Arweave) and its confirmations, so at 1,000
// events/s a few hundred thousand events are signed and not yet confirmed.
const (
	DefaultBundleInterval        = 5 * time.Second
	DefaultBundleMaxItems        = 10000
	DefaultBundleMaxBytes        = 8 << 20
	DefaultMaxUnconfirmedBundled = 500_000
)
