package chain

import (
	"encoding/json"
	"log/slog"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
)

// Signing again. A transaction a poll saw unmined (missing, or pending) at a height past its
// anchor's validity can never be mined (record.ExpiredAt). From the lowest such event
// (meta.ResignFrom) every event not mined is signed again — same seq, same links to the
// event before it — with a fresh anchor, and its old transaction listed as replaced.
//
// Invariant: an event is signed again only once a poll has seen every transaction of the
// chain from meta.ResignFrom on either mined or dead (ExpiredAt set). So no transaction that
// may still be mined is ever replaced — never two transactions for one seq — and no event
// signed again is linked to by one that may still be mined later. While meta.ResignFrom is
// set, nothing new is signed (it would link to a head about to be replaced), and the events
// after it are not posted again (they are dead soon, and signed again).
//
// It goes in batches of up to prepareBatch events, signed off the mailbox in the prepare
// effect like new events, each batch committed (and then posted) in one write; ResignFrom
// moves past each batch, so a crash between batches resumes where it stopped.

// resignItem is an event to sign again: its seq, its dead transaction's id and data.
type resignItem struct {
	Seq   int64  `json:"seq"`
	OldTx string `json:"old_tx"`
	Data  []byte `json:"data"`
}

// recordState is what signing again needs of a stored event (its transaction left undecoded).
type recordState struct {
	Seq          int64  `json:"seq"`
	Status       string `json:"status"`
	Mined        bool   `json:"mined,omitempty"`
	ExpiredAt    int64  `json:"expired_at,omitempty"`
	AnchorHeight int64  `json:"anchor_height,omitempty"`
}

func (r recordState) mined() bool { return r.Mined || r.Status == StatusConfirmed }

// settleResign makes m.ResignFrom the lowest dead event of the run to sign again — past events
// seen mined, down past dead events before it — and works out whether signing again may go
// ahead (a.resignReady: every event from there on seen mined or dead, and the event before it
// not dead) and what the polls should ask about first (a.resignNext). It clears ResignFrom
// when no event from there on is dead.
func (a *actor) settleResign(ctx *actors.Context, m meta) (meta, error) {
	a.resignReady, a.resignNext = false, 0
	kvs, err := ctx.List(actors.ListOptions{Start: eventKey(m.ResignFrom), End: []byte("e0")})
	if err != nil {
		return m, err
	}
	var firstDead int64
	settled := true
	for _, kv := range kvs {
		var r recordState
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return m, err
		}
		switch {
		case r.mined():
		case r.ExpiredAt > 0 && firstDead == 0:
			firstDead = r.Seq
		case r.ExpiredAt == 0 && firstDead > 0 && settled:
			settled, a.resignNext = false, r.Seq // may still be mined: ask about it
		}
	}
	if firstDead == 0 {
		m.ResignFrom = 0 // the node had them after all
		return m, nil
	}
	m.ResignFrom = firstDead
	// Dead events just before it belong to the same run: the first signed again would link to
	// a dead transaction otherwise.
	for m.ResignFrom > m.ConfirmedSeq+1 {
		prev, _, err := load[recordState](ctx, eventKey(m.ResignFrom-1))
		if err != nil {
			return m, err
		}
		if prev.mined() || prev.ExpiredAt == 0 {
			if !prev.mined() && a.expiredAt(prev.AnchorHeight, a.height) {
				// Past its anchor's validity, and no poll has seen it yet: ask first.
				settled, a.resignNext = false, prev.Seq
			}
			break
		}
		m.ResignFrom--
	}
	a.resignReady = settled
	return m, nil
}

// resignBatch picks the next events to sign again: from m.ResignFrom (dead, see settleResign),
// up to n events not mined in a row; head is the event before the first.
func (a *actor) resignBatch(ctx *actors.Context, m meta, n int) (head Link, items []resignItem, err error) {
	if m.ResignFrom > 1 {
		before, _, err := load[record](ctx, eventKey(m.ResignFrom-1))
		if err != nil {
			return head, nil, err
		}
		head = Link{Seq: before.Seq, TxID: before.TxID, CID: before.CID}
	}
	kvs, err := ctx.List(actors.ListOptions{Start: eventKey(m.ResignFrom), End: []byte("e0"), Limit: n})
	if err != nil {
		return head, nil, err
	}
	for _, kv := range kvs {
		var r record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return head, nil, err
		}
		if r.Mined || r.Status == StatusConfirmed {
			break // the batch ends before it; settleResign moves past it
		}
		var old arweave.Tx
		if err := json.Unmarshal(r.Tx, &old); err != nil {
			return head, nil, err
		}
		items = append(items, resignItem{Seq: r.Seq, OldTx: r.TxID, Data: old.Data})
		if len(items) == n {
			break
		}
	}
	return head, items, nil
}

// commitResigned stores the events signed again, each replacing its dead transaction, and
// posts each once that commits; unless the chain changed since the prepare began (then the
// next prepare does it again).
func (a *actor) commitResigned(ctx *actors.Context, m meta, p prepared) (meta, error) {
	if len(p.Signed) == 0 || p.From != m.ResignFrom || p.Head.Seq != m.ResignFrom-1 {
		return m, nil // ResignFrom moved since the prepare began
	}
	recs := make([]record, len(p.Signed))
	for i, s := range p.Signed {
		rec, found, err := load[record](ctx, eventKey(s.Seq))
		if err != nil || !found || s.Seq != m.ResignFrom+int64(i) || rec.TxID != s.Old || rec.Mined || rec.Status == StatusConfirmed {
			return m, err
		}
		recs[i] = rec
	}
	if first := p.Signed[0].Seq; first > 1 {
		before, _, err := load[record](ctx, eventKey(first-1))
		if err != nil || before.TxID != p.Head.TxID {
			return m, err
		}
	}
	prev := p.Head
	for i, s := range p.Signed {
		var tx arweave.Tx
		if err := json.Unmarshal(s.Tx, &tx); err != nil {
			return m, err
		}
		rec := recs[i]
		rec.Replaced = append(rec.Replaced, rec.TxID)
		rec.TxID, rec.Tx, rec.Status, rec.AnchorHeight, rec.ExpiredAt = tx.IDString(), s.Tx, StatusSigned, max(p.Height, a.height), 0
		rec.PrevTx, rec.PrevCID = nil, nil
		if prev.Seq > 0 {
			prevTx, prevCID := prev.TxID, prev.CID
			rec.PrevTx, rec.PrevCID = &prevTx, &prevCID
		}
		store(ctx, eventKey(rec.Seq), rec)
		v, _, err := load[version](ctx, versionKey(rec.EntityID, rec.Ver))
		if err != nil {
			return m, err
		}
		v.TxID = rec.TxID
		store(ctx, versionKey(rec.EntityID, rec.Ver), v)
		if err := a.setLatest(ctx, rec); err != nil {
			return m, err
		}
		if rec.Seq == m.Seq {
			m.TxID = rec.TxID
		}
		if err := a.post(ctx, rec.Seq, &tx); err != nil {
			return m, err
		}
		prev = Link{Seq: rec.Seq, TxID: rec.TxID, CID: rec.CID}
	}
	a.cfg.Metrics.event(eventResigned, len(p.Signed))
	last := p.Signed[len(p.Signed)-1].Seq
	if last < m.Seq {
		next, _, err := load[record](ctx, eventKey(last+1))
		if err != nil {
			return m, err
		}
		if next.Mined || next.Status == StatusConfirmed {
			// Mined while the event before it was dead: its prev_tx names a transaction that
			// can never be mined, so the chain on Arweave breaks there. Nothing can mend a
			// mined transaction; say so loudly.
			slog.Error("chain: an event was mined after one whose transaction expired unmined; the chain on Arweave is broken there",
				"chain", ctx.ID(), "broken_at_seq", next.Seq)
			a.cfg.Metrics.event(eventBroken, 1)
		}
	}
	m.ResignFrom = last + 1
	if m.ResignFrom > m.Seq {
		m.ResignFrom, a.resignReady = 0, false // every event from the first dead one is new or mined
		return m, nil
	}
	return a.settleResign(ctx, m)
}
