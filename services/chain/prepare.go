package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// Preparing: the "prepare" effect reads what signing needs from the gateway (an anchor, the
// height, prices) unless the actor's quote is fresh, and signs the next queued events, each
// linked to the one before, off the mailbox; its result commits them all in one write, and
// posts each once that commits. One prepare runs at a time, and its result commits only if
// the head and the queue's front are still what it signed after (a failed prepare or a retry
// may move the front meanwhile).

// prepareBatch bounds the events one prepare signs (RSA signing is the chain's CPU cost).
const prepareBatch = 64

// quote is what signing needs of the gateway. It is reused while fresh (see fresh).
type quote struct {
	Anchor []byte
	Height int64          // read after the anchor: at least the anchor's
	At     time.Time      // when it was read
	Prices map[int]string // winston by arweave.PricedChunks
}

// fresh reports whether the quote may sign at now: read within AnchorReuse, and the polls
// have not seen the chain grow a fifth of an anchor's validity past it.
func (a *actor) fresh(now time.Time) bool {
	q := a.quote
	return q.Anchor != nil && now.Sub(q.At) < a.cfg.AnchorReuse && a.height-q.Height < max(a.cfg.AnchorDepth/5, 1)
}

// renewQuote reads a new anchor, height and the prices in use in the background once the
// quote is half way to stale, so that signing never waits for them while events keep coming.
func (a *actor) renewQuote(ctx *actors.Context) error {
	q := a.quote
	half := q.Anchor != nil && (ctx.Now().Sub(q.At) >= a.cfg.AnchorReuse/2 || a.height-q.Height >= max(a.cfg.AnchorDepth/10, 1))
	if a.renewing || !half || !a.fresh(ctx.Now()) {
		return nil // none to renew, under way, or stale already: the next prepare reads one
	}
	a.renewing = true
	gw, timeout, at, gen := a.cfg.Gateway, a.cfg.CallTimeout, ctx.Now(), a.quoteGen
	chunks := slices.Collect(maps.Keys(q.Prices))
	return ctx.Effect("quote", func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		p := prepared{ReadAt: at, Gen: gen, Prices: map[int]string{}}
		var err error
		if p.Anchor, err = gw.Anchor(c); err != nil {
			return nil, err
		}
		if p.Height, err = gw.Height(c); err != nil {
			return nil, err
		}
		for _, n := range chunks { // the prices in use, read again with it
			if p.Prices[n], err = gw.Price(c, n*arweave.MaxChunkSize); err != nil {
				return nil, err
			}
		}
		return json.Marshal(p)
	})
}

// quoteRenewed takes a renewed quote.
func (a *actor) quoteRenewed(r actors.EffectResult) error {
	a.renewing = false
	var p prepared
	if r.Err == nil && json.Unmarshal(r.Output, &p) == nil {
		a.keepQuote(p) // (on an error, the next prepare reads one once this one is stale)
	}
	return nil
}

// keepQuote keeps the quote an effect read or used, unless the quote was dropped since the
// effect began (a refused post: it may be what was refused) or a newer one is kept.
func (a *actor) keepQuote(p prepared) {
	if p.Gen != a.quoteGen || (a.quote.Anchor != nil && p.ReadAt.Before(a.quote.At)) {
		return
	}
	a.quote = quote{Anchor: p.Anchor, Height: p.Height, At: p.ReadAt, Prices: p.Prices}
}

// dropQuote forgets the quote: the next prepare reads a new one, and no effect under way puts
// the old one back.
func (a *actor) dropQuote() {
	a.quote = quote{}
	a.quoteGen++
}

// prepareJob is the work of one "prepare" effect: new events to sign (Items), or events to
// sign again (Resign), each linked to the one before, the first to Head.
type prepareJob struct {
	Chain  string
	From   int64 // signing again: meta.ResignFrom when it began
	Gen    int   // the quote generation it began in
	Head   Link
	Items  []queuedItem
	Resign []resignItem
	Quote  quote // fresh, or zero: read it
	Wallet *arweave.Wallet
	// MaxReward is the reward cap (Config.MaxReward), checked as each transaction is signed.
	MaxReward uint64
	// ItemSigner, in bundle mode, signs data items instead of transactions: no anchor, no
	// price, no reward.
	ItemSigner ans104.Signer
}

type queuedItem struct {
	Key   []byte // its q/ key
	Event Event
}

// prepared is the result of the "prepare" effect.
type prepared struct {
	Anchor []byte         `json:"anchor"`
	Height int64          `json:"height"`
	Prices map[int]string `json:"prices"`
	ReadAt time.Time      `json:"read_at"` // when the anchor was read (its quote's age)
	Gen    int            `json:"gen"`
	From   int64          `json:"from,omitempty"`
	Resign bool           `json:"resign"`
	Head   Link           `json:"head"`
	Signed []signedItem   `json:"signed"`
}

// signedItem is an event signed: a queued one (Key) or one signed again (Seq, Old).
type signedItem struct {
	Key []byte          `json:"key,omitempty"`
	Seq int64           `json:"seq,omitempty"`
	Old string          `json:"old,omitempty"`
	Tx  json.RawMessage `json:"tx,omitempty"`
	// Item is the signed data item (bundle mode).
	Item []byte `json:"item,omitempty"`
}

// pump starts a prepare for the next queued events, or for the next events to sign again,
// unless one runs, a failed one waits for its retry, or no post or unconfirmed slot is free.
func (a *actor) pump(ctx *actors.Context, m meta) error {
	a.cfg.Metrics.depth(a.name, m.Queued, len(a.inflight), m.Seq-m.ConfirmedSeq)
	if a.bundles(m) {
		return a.pumpItems(ctx, m)
	}
	if a.cfg.Gateway == nil || a.preparing || ctx.Now().Before(a.retryAt) {
		return nil // no gateway: writes are refused at the route, nothing is queued
	}
	job := prepareJob{Chain: ctx.ID(), Head: Link{Seq: m.Seq, TxID: m.TxID, CID: m.CID}, Wallet: a.cfg.Wallet, From: m.ResignFrom, Gen: a.quoteGen,
		MaxReward: a.cfg.MaxReward}
	room := a.cfg.MaxInFlight - len(a.inflight)
	if m.ResignFrom > 0 {
		if !a.resignReady || room <= 0 {
			return nil // the polls have not seen every later transaction mined or dead yet
		}
		var err error
		if job.Head, job.Resign, err = a.resignBatch(ctx, m, min(room, prepareBatch)); err != nil || len(job.Resign) == 0 {
			return err
		}
	} else {
		items, err := nextQueued(ctx, min(room, a.cfg.MaxUnconfirmed-int(m.Seq-m.ConfirmedSeq), prepareBatch))
		if err != nil || len(items) == 0 {
			return err
		}
		for _, it := range items {
			v, _, err := load[version](ctx, it.Value)
			if err != nil {
				return err
			}
			job.Items = append(job.Items, queuedItem{Key: it.Key, Event: v.Event})
		}
	}
	// Signing again always reads a fresh anchor: the old one is what expired.
	if len(job.Resign) == 0 && a.fresh(ctx.Now()) {
		if err := a.renewQuote(ctx); err != nil {
			return err
		}
		job.Quote = a.quote
		job.Quote.Prices = maps.Clone(a.quote.Prices) // the effect adds to its own copy
	} else {
		job.Quote = quote{At: ctx.Now()}
	}
	return a.startPrepare(ctx, job)
}

// pumpItems is pump in bundle mode: the next bundle when due, and the next queued events
// signed as data items (the wrapper, not the items, needs the gateway's anchor and price).
func (a *actor) pumpItems(ctx *actors.Context, m meta) error {
	if err := a.maybeBundle(ctx, m, false); err != nil {
		return err
	}
	if a.cfg.Gateway == nil || a.cfg.ItemSigner == nil || a.preparing || ctx.Now().Before(a.retryAt) {
		return nil
	}
	if own := arweave.AddressOf(a.cfg.ItemSigner.Owner()); m.ItemSigner != "" && own != m.ItemSigner {
		if !a.signerWarned {
			a.signerWarned = true
			slog.Error("chain: this node's item signer is not the chain's: nothing is signed here (give every node the same --chain-signer-key)",
				"chain", ctx.ID(), "chain_signer", m.ItemSigner, "node_signer", own)
		}
		return nil
	}
	items, err := nextQueued(ctx, min(a.cfg.MaxUnconfirmed-int(m.Seq-m.ConfirmedSeq), prepareBatch))
	if err != nil || len(items) == 0 {
		return err
	}
	job := prepareJob{Chain: ctx.ID(), Head: Link{Seq: m.Seq, TxID: m.TxID, CID: m.CID}, Gen: a.quoteGen, ItemSigner: a.cfg.ItemSigner}
	for _, it := range items {
		v, _, err := load[version](ctx, it.Value)
		if err != nil {
			return err
		}
		job.Items = append(job.Items, queuedItem{Key: it.Key, Event: v.Event})
	}
	return a.startPrepare(ctx, job)
}

// startPrepare runs job in the "prepare" effect.
func (a *actor) startPrepare(ctx *actors.Context, job prepareJob) error {
	a.preparing = true
	gw, timeout := a.cfg.Gateway, a.cfg.CallTimeout
	return ctx.Effect("prepare", func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		p, err := job.run(c, gw)
		if err != nil {
			return nil, err
		}
		return json.Marshal(p)
	})
}

// nextQueued lists up to n queued events, in acceptance order (none when n is not positive).
func nextQueued(ctx *actors.Context, n int) ([]actors.KV, error) {
	if n <= 0 {
		return nil, nil // (a Limit of 0 would list them all)
	}
	return ctx.List(actors.ListOptions{Prefix: []byte("q/"), Limit: n})
}

// run reads the quote if it has none, and signs the items (or those to sign again), pricing
// each by its size's chunk count.
func (j prepareJob) run(ctx context.Context, gw Gateway) (prepared, error) {
	p := prepared{Anchor: j.Quote.Anchor, Height: j.Quote.Height, Prices: j.Quote.Prices, ReadAt: j.Quote.At,
		Gen: j.Gen, From: j.From, Resign: len(j.Resign) > 0, Head: j.Head}
	if j.ItemSigner != nil {
		return j.signItems(ctx, p)
	}
	if p.Anchor == nil {
		anchor, err := gw.Anchor(ctx)
		if err != nil {
			return p, err
		}
		// The height is read after the anchor, so that it is at least the anchor's: expiry is
		// then never judged early.
		height, err := gw.Height(ctx)
		if err != nil {
			return p, err
		}
		p.Anchor, p.Height, p.Prices = anchor, height, map[int]string{}
	}
	prev := j.Head
	sign := func(e *Event) (*arweave.Tx, json.RawMessage, error) {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		data, tags := Payload(j.Chain, e, prev)
		chunks := arweave.PricedChunks(len(data))
		reward, ok := p.Prices[chunks]
		if !ok {
			var err error
			if reward, err = gw.Price(ctx, chunks*arweave.MaxChunkSize); err != nil {
				return nil, nil, err
			}
			p.Prices[chunks] = reward
		}
		tx := arweave.NewTx(data, tags)
		tx.LastTx, tx.Reward = p.Anchor, reward
		if err := signCapped(tx, j.Wallet, j.MaxReward); err != nil {
			return nil, nil, err
		}
		signed, _ := json.Marshal(tx)
		prev = Link{Seq: prev.Seq + 1, TxID: tx.IDString(), CID: e.CID}
		return tx, signed, nil
	}
	for _, it := range j.Items {
		_, signed, err := sign(&it.Event)
		if err != nil {
			return p, err
		}
		p.Signed = append(p.Signed, signedItem{Key: it.Key, Tx: signed})
	}
	for _, it := range j.Resign {
		// Each keeps its seq, version and manifest; the links it changes are as long.
		at, manifest, err := ParsePayload(it.Data)
		if err != nil {
			return p, err
		}
		if it.Seq != prev.Seq+1 {
			return p, fmt.Errorf("chain %s: event %d to sign again after event %d", j.Chain, it.Seq, prev.Seq)
		}
		e := Event{EntityID: at.PI, Ver: at.Ver, Op: at.Op, Vis: at.Vis, TS: at.TS, CID: at.CID, Manifest: manifest}
		_, signed, err := sign(&e)
		if err != nil {
			return p, err
		}
		p.Signed = append(p.Signed, signedItem{Seq: it.Seq, Old: it.OldTx, Tx: signed})
	}
	return p, nil
}

// signItems signs the items of the queued events, each linked to the one before.
func (j prepareJob) signItems(ctx context.Context, p prepared) (prepared, error) {
	prev := j.Head
	for _, it := range j.Items {
		if err := ctx.Err(); err != nil {
			return p, err
		}
		item, err := Item(j.Chain, &it.Event, prev, j.ItemSigner)
		if err != nil {
			return p, fmt.Errorf("chain %s: sign the item of %s v%d: %w", j.Chain, it.Event.EntityID, it.Event.Ver, err)
		}
		p.Signed = append(p.Signed, signedItem{Key: it.Key, Item: item.Bytes()})
		prev = Link{Seq: prev.Seq + 1, TxID: item.IDString(), CID: it.Event.CID}
	}
	return p, nil
}

// prepareDone takes a prepare's result: the quote is kept, and the events signed are
// committed — new ones only while nothing is to be signed again, those signed again only
// while that is still due.
func (a *actor) prepareDone(ctx *actors.Context, m meta, r actors.EffectResult) error {
	a.preparing = false
	if r.Err != nil {
		if isFeeTooHigh(r.Err) {
			a.cfg.Metrics.quoteRefused()
		}
		a.dropQuote()
		return a.prepareFailed(ctx, m, r.Err)
	}
	if m.Attempts != 0 {
		m.Attempts = 0
		store(ctx, metaKey, m)
	}
	var p prepared
	if err := json.Unmarshal(r.Output, &p); err != nil {
		return err
	}
	a.keepQuote(p)
	var err error
	switch {
	case p.Resign && m.ResignFrom > 0:
		if m, err = a.commitResigned(ctx, m, p); err == nil {
			store(ctx, metaKey, m)
		}
	case !p.Resign && m.ResignFrom == 0:
		m, err = a.commitSigned(ctx, m, p)
	}
	if err != nil {
		return err
	}
	return a.pump(ctx, m)
}

// commitSigned stores each event signed — its transaction, the event, its version, the
// entity's latest pointer and the head together — and posts each once that commits.
func (a *actor) commitSigned(ctx *actors.Context, m meta, p prepared) (meta, error) {
	if len(p.Signed) == 0 || p.Head != (Link{Seq: m.Seq, TxID: m.TxID, CID: m.CID}) {
		return m, nil
	}
	front, err := nextQueued(ctx, len(p.Signed))
	if err != nil {
		return m, err
	}
	for i, s := range p.Signed {
		if i >= len(front) || !bytes.Equal(front[i].Key, s.Key) {
			return m, nil // the queue's front moved: sign it again
		}
	}
	now := ctx.Now().UnixMilli()
	for i, s := range p.Signed {
		var tx arweave.Tx
		var id string
		if s.Item != nil {
			item, err := ans104.Parse(s.Item)
			if err != nil {
				return m, err
			}
			id = item.IDString()
		} else {
			if err := json.Unmarshal(s.Tx, &tx); err != nil {
				return m, err
			}
			id = tx.IDString()
		}
		v, _, err := load[version](ctx, front[i].Value)
		if err != nil {
			return m, err
		}
		seq := m.Seq + 1
		rec := record{eventView: eventView{Seq: seq, EntityID: v.EntityID, Ver: v.Ver, CID: v.CID, Op: v.Op, Vis: v.Vis, TS: v.TS,
			TxID: id, Status: StatusSigned}, Tx: s.Tx, Item: s.Item, AnchorHeight: max(p.Height, a.height), Accepted: v.CreatedAt}
		if m.Seq > 0 {
			prevTx, prevCID := m.TxID, m.CID
			rec.PrevTx, rec.PrevCID = &prevTx, &prevCID
		}
		store(ctx, eventKey(seq), rec)
		v.Status, v.Seq, v.TxID, v.Queue = StatusSigned, seq, id, 0
		v.Manifest = nil // on Arweave, and in the signed transaction until confirmed
		store(ctx, front[i].Value, v)
		if err := a.setLatest(ctx, rec); err != nil {
			return m, err
		}
		ctx.Delete(front[i].Key)
		m.Seq, m.TxID, m.CID, m.Queued, m.UpdatedAt = seq, id, v.CID, m.Queued-1, now
		if s.Item != nil {
			m.Mode = ModeBundle
			if m.ItemSigner == "" {
				m.ItemSigner = arweave.AddressOf(a.cfg.ItemSigner.Owner())
			}
			continue // posted in its bundle
		}
		if err := a.post(ctx, seq, &tx); err != nil {
			return m, err
		}
	}
	a.cfg.Metrics.event(eventSigned, len(p.Signed))
	store(ctx, metaKey, m)
	if a.bundles(m) {
		return m, nil // the polls ask about bundles, once there are
	}
	// The next poll within PollInterval: a poll alarm already set for later (the watchdog of
	// a poll under way) is brought forward.
	next := ctx.Now().Add(a.cfg.PollInterval)
	if at, due, err := a.pollDue(ctx); err != nil || (due && !at.After(next)) {
		return m, err
	}
	return m, ctx.SetAlarm("poll", next)
}
