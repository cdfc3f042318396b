package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
)

// Preparing: the "prepare" effect reads what signing needs from the gateway (an anchor, the
// height, prices) unless the actor's quote is fresh, and signs the next queued events, each
// linked to the one before, off the mailbox; its result commits them all in one write, and
// posts each once that commits. One prepare runs at a time, and only its result moves the
// head or the queue's front, so the events it signed still follow the head when it returns.

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

// prepareJob is the work of one "prepare" effect.
type prepareJob struct {
	Chain  string
	Head   Link         // the head the items follow
	Items  []queuedItem // the next queued events
	Resign bool         // for signing again from meta.ResignFrom: a fresh anchor
	Need   []int        // chunk counts to price
	Quote  quote        // fresh, or zero: read it
	Wallet *arweave.Wallet
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
	Fresh  bool           `json:"fresh"` // read by this prepare
	Resign bool           `json:"resign"`
	Head   Link           `json:"head"`
	Signed []signedItem   `json:"signed"`
}

type signedItem struct {
	Key []byte          `json:"key"`
	Tx  json.RawMessage `json:"tx"`
}

// pump starts a prepare for the next queued events (or for signing again), unless one runs
// or no post or unconfirmed slot is free.
func (a *actor) pump(ctx *actors.Context, m meta) error {
	a.cfg.Metrics.depth(a.name, m.Queued, a.posting, m.Seq-m.ConfirmedSeq)
	if a.cfg.Gateway == nil || a.preparing {
		return nil // no gateway: writes are refused at the route, nothing is queued
	}
	job := prepareJob{Chain: ctx.ID(), Head: Link{Seq: m.Seq, TxID: m.TxID, CID: m.CID}, Wallet: a.cfg.Wallet}
	if m.ResignFrom > 0 {
		// Events signed again keep their payload's size (the links they change are as long).
		recs, err := a.unmined(ctx, m.ResignFrom)
		if err != nil {
			return err
		}
		for _, r := range recs {
			var tx arweave.Tx
			if err := json.Unmarshal(r.Tx, &tx); err != nil {
				return err
			}
			job.Need = append(job.Need, arweave.PricedChunks(tx.DataSize))
		}
		job.Resign = true
	} else {
		room := min(a.cfg.MaxInFlight-a.posting, a.cfg.MaxUnconfirmed-int(m.Seq-m.ConfirmedSeq))
		items, err := nextQueued(ctx, min(room, prepareBatch))
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
	if !job.Resign && a.fresh(ctx.Now()) {
		job.Quote = a.quote
	}
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

// run reads the quote if it has none, prices what it needs, and signs the items.
func (j prepareJob) run(ctx context.Context, gw Gateway) (prepared, error) {
	p := prepared{Anchor: j.Quote.Anchor, Height: j.Quote.Height, Prices: maps.Clone(j.Quote.Prices), Resign: j.Resign, Head: j.Head}
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
		p.Anchor, p.Height, p.Prices, p.Fresh = anchor, height, map[int]string{}, true
	}
	price := func(chunks int) (string, error) {
		if r, ok := p.Prices[chunks]; ok {
			return r, nil
		}
		r, err := gw.Price(ctx, chunks*arweave.MaxChunkSize)
		if err == nil {
			p.Prices[chunks] = r
		}
		return r, err
	}
	for _, c := range j.Need {
		if _, err := price(c); err != nil {
			return p, err
		}
	}
	prev := j.Head
	for _, it := range j.Items {
		if err := ctx.Err(); err != nil {
			return p, err
		}
		data, tags := Payload(j.Chain, &it.Event, prev)
		reward, err := price(arweave.PricedChunks(len(data)))
		if err != nil {
			return p, err
		}
		tx := arweave.NewTx(data, tags)
		tx.LastTx, tx.Reward = p.Anchor, reward
		if err := tx.Sign(j.Wallet); err != nil {
			return p, err
		}
		signed, _ := json.Marshal(tx)
		p.Signed = append(p.Signed, signedItem{Key: it.Key, Tx: signed})
		prev = Link{Seq: prev.Seq + 1, TxID: tx.IDString(), CID: it.Event.CID}
	}
	return p, nil
}

// prepareDone takes a prepare's result: the quote is kept, and the events signed are
// committed — or, while events are to be signed again, that is done first and the events
// signed for the old head are dropped (the next prepare signs them again).
func (a *actor) prepareDone(ctx *actors.Context, m meta, r actors.EffectResult) error {
	a.preparing = false
	if r.Err != nil {
		a.quote = quote{}
		return a.prepareFailed(ctx, m, r.Err)
	}
	m.Attempts = 0
	var p prepared
	if err := json.Unmarshal(r.Output, &p); err != nil {
		return err
	}
	if p.Fresh {
		a.quote = quote{Anchor: p.Anchor, Height: p.Height, At: ctx.Now(), Prices: p.Prices}
	} else if a.quote.Anchor != nil && bytes.Equal(a.quote.Anchor, p.Anchor) {
		maps.Copy(a.quote.Prices, p.Prices)
	}
	var err error
	switch {
	case m.ResignFrom > 0 && p.Resign:
		m, err = a.resign(ctx, m, p)
		store(ctx, metaKey, m)
	case m.ResignFrom == 0:
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
		if err := json.Unmarshal(s.Tx, &tx); err != nil {
			return m, err
		}
		v, _, err := load[version](ctx, front[i].Value)
		if err != nil {
			return m, err
		}
		seq, id := m.Seq+1, tx.IDString()
		rec := record{eventView: eventView{Seq: seq, EntityID: v.EntityID, Ver: v.Ver, CID: v.CID, Op: v.Op, Vis: v.Vis, TS: v.TS,
			TxID: id, Status: StatusSigned}, Tx: s.Tx, AnchorHeight: p.Height, Accepted: v.CreatedAt}
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
		if err := a.post(ctx, seq, &tx); err != nil {
			return m, err
		}
	}
	a.cfg.Metrics.event(eventSigned, len(p.Signed))
	store(ctx, metaKey, m)
	// The next poll within PollInterval: a poll alarm already set for later (the watchdog of
	// a poll under way) is brought forward.
	next := ctx.Now().Add(a.cfg.PollInterval)
	if at, due, err := a.pollDue(ctx); err != nil || (due && !at.After(next)) {
		return m, err
	}
	return m, ctx.SetAlarm("poll", next)
}
