package chain

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
)

// Activate resumes from storage: the next queued events are prepared (unless events are to be
// signed again: the first poll works out whether they may be), and the unconfirmed events are
// checked by id at once (and posted again, same bytes, if the node does not know them).
func (a *actor) Activate(ctx *actors.Context) error {
	m, _, err := load[meta](ctx, metaKey)
	if err != nil {
		return err
	}
	if a.pollWanted(m) {
		if err := ctx.SetAlarm("poll", ctx.Now()); err != nil {
			return err
		}
	}
	return a.pump(ctx, m)
}

// pollWanted reports whether the chain has transactions to ask the gateway about: events not
// confirmed, or in bundle mode bundles not final (a reorg may still drop them).
func (a *actor) pollWanted(m meta) bool {
	return m.Seq > m.ConfirmedSeq || (a.bundles(m) && (m.FinalSeq < m.ConfirmedSeq || m.WatchFrom > 0))
}

// bundles reports whether the chain signs its events as data items in bundles: the node's
// --chain-mode says so, or the chain already did.
func (a *actor) bundles(m meta) bool { return a.cfg.Mode == ModeBundle || m.Mode == ModeBundle }

// Deactivate implements actors.Deactivator: the chain's gauges go with its activation.
func (a *actor) Deactivate() { a.cfg.Metrics.drop(a.name) }

// Alarm runs the "poll" and "pump" alarms.
func (a *actor) Alarm(ctx *actors.Context, al actors.Alarm) error {
	m, _, err := load[meta](ctx, metaKey)
	if err != nil {
		return err
	}
	switch al.Name {
	case "pump":
		a.retryAt = time.Time{}
		return a.pump(ctx, m)
	case "bundle":
		a.bundleAt = time.Time{}
		return a.maybeBundle(ctx, m, true)
	case "poll":
		if !a.pollWanted(m) {
			return nil
		}
		// A watchdog: the next poll is set when this one's result comes back; should the
		// result be lost (the activation stopped), this one fires.
		if err := ctx.SetAlarm("poll", ctx.Now().Add(4*a.cfg.PollInterval)); err != nil {
			return err
		}
		if a.bundles(m) {
			return a.pollBundles(ctx, m)
		}
		return a.poll(ctx, m)
	}
	return nil
}

// poll asks the gateway about the oldest signed events not confirmed nor dead yet (pollWindow
// of them), and while events are to be signed again, about those settleResign waits for.
func (a *actor) poll(ctx *actors.Context, m meta) error {
	if a.polling {
		return nil
	}
	// The oldest unconfirmed events: confirmed_seq advances from there, and a later event
	// dropped by the node is posted again once it is among them (or signed again, should its
	// anchor expire first).
	recs, err := ctx.List(actors.ListOptions{Start: eventKey(m.ConfirmedSeq + 1), End: []byte("e0"), Limit: pollWindow})
	if err != nil {
		return err
	}
	if m.ResignFrom > 0 && a.resignNext > m.ConfirmedSeq+pollWindow {
		// Signing again waits until every transaction from ResignFrom on was seen mined or
		// dead: ask about those past the first window too.
		more, err := ctx.List(actors.ListOptions{Start: eventKey(a.resignNext), End: []byte("e0"), Limit: pollWindow / 2})
		if err != nil {
			return err
		}
		recs = append(recs, more...)
	}
	ids := map[int64]string{}
	for _, kv := range recs {
		var r record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return err
		}
		if r.Status != StatusConfirmed && r.ExpiredAt == 0 { // (a dead one stays dead)
			ids[r.Seq] = r.TxID
		}
	}
	return a.startPoll(ctx, ids)
}

// startPoll runs the "poll" effect: the node's height, then the status of each transaction of
// ids (keyed by the event, or the first event of the bundle, it anchors).
func (a *actor) startPoll(ctx *actors.Context, ids map[int64]string) error {
	a.polling = true
	gw, timeout := a.cfg.Gateway, a.cfg.CallTimeout
	return ctx.Effect("poll", func(c context.Context) ([]byte, error) {
		out := map[int64]polledState{}
		// The height is read before the statuses: a transaction missing at a height past its
		// anchor's validity was missing then too.
		hc, cancel := context.WithTimeout(c, timeout)
		height, err := gw.Height(hc)
		cancel()
		if err != nil {
			return nil, err
		}
		// At most pollParallel questions at once, all within one timeout: a slow node delays
		// the next poll by that much at most, and an unanswered question counts as unknown.
		cc, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		slots := make(chan struct{}, pollParallel)
		for _, key := range slices.Sorted(maps.Keys(ids)) { // the oldest first: a slow node leaves the newest unknown
			id := ids[key]
			wg.Add(1)
			slots <- struct{}{}
			go func() {
				defer func() { <-slots; wg.Done() }()
				st := polledState{TxID: id, State: statusState(gw.StatusOf(cc, id))}
				mu.Lock()
				out[key] = st
				mu.Unlock()
			}()
		}
		wg.Wait()
		return json.Marshal(polled{Height: height, States: out})
	})
}

// HandleEffect takes the results of "prepare" (events signed), "quote" (a renewed anchor),
// "post:<seq>:<tx>" and "poll".
func (a *actor) HandleEffect(ctx *actors.Context, r actors.EffectResult) error {
	m, _, err := load[meta](ctx, metaKey)
	if err != nil {
		return err
	}
	switch {
	case r.Name == "prepare":
		return a.prepareDone(ctx, m, r)
	case r.Name == "quote":
		return a.quoteRenewed(r)
	case r.Name == "bundle":
		return a.bundleDone(ctx, m, r)
	case strings.HasPrefix(r.Name, "wrap:"):
		return a.wrapperPosted(ctx, m, r)
	case strings.HasPrefix(r.Name, "data:"):
		return a.dataPosted(ctx, m, r)
	case strings.HasPrefix(r.Name, "post:"):
		seqStr, txID, _ := strings.Cut(strings.TrimPrefix(r.Name, "post:"), ":")
		seq, _ := strconv.ParseInt(seqStr, 10, 64)
		delete(a.inflight, txID)
		if errors.Is(r.Err, arweave.ErrRejected) {
			a.dropQuote() // perhaps underpriced, or its anchor too old: read them again
		}
		// On an error the poll finds out, and posts it again if the node does not have it.
		// The answer about a transaction since replaced says nothing of the new one.
		rec, found, err := load[record](ctx, eventKey(seq))
		if err != nil {
			return err
		}
		first := found && rec.Status == StatusSigned && rec.TxID == txID
		a.cfg.Metrics.posted(r.Err, rec.Accepted, first && len(rec.Replaced) == 0, ctx.Now())
		if first && r.Err == nil {
			rec.Status = StatusPosted
			store(ctx, eventKey(seq), rec)
		}
		return a.pump(ctx, m) // a post slot opened
	case r.Name == "poll":
		a.polling = false
		var p polled
		if r.Err == nil {
			if err := json.Unmarshal(r.Output, &p); err != nil {
				return err
			}
		}
		a.height = max(a.height, p.Height)
		if a.bundles(m) {
			if m, err = a.bundlesPolled(ctx, m, p); err != nil {
				return err
			}
			store(ctx, metaKey, m)
			if a.pollWanted(m) {
				if err := ctx.SetAlarm("poll", ctx.Now().Add(a.cfg.PollInterval)); err != nil {
					return err
				}
			}
			return a.pump(ctx, m)
		}
		seqs := make([]int64, 0, len(p.States))
		for seq := range p.States {
			seqs = append(seqs, seq)
		}
		slices.Sort(seqs) // lowest first: reposts go out in seq order, and stop at an expiry
		for _, seq := range seqs {
			expired, err := a.observe(ctx, seq, p.States[seq], p.Height, m.ResignFrom)
			if err != nil {
				return err
			}
			if expired && (m.ResignFrom == 0 || seq < m.ResignFrom) {
				m.ResignFrom = seq
			}
		}
		if m, err = a.advanceConfirmed(ctx, m); err != nil {
			return err
		}
		if m.ResignFrom > 0 {
			if m, err = a.settleResign(ctx, m); err != nil {
				return err
			}
		}
		store(ctx, metaKey, m)
		if a.pollWanted(m) {
			if err := ctx.SetAlarm("poll", ctx.Now().Add(a.cfg.PollInterval)); err != nil {
				return err
			}
		}
		return a.pump(ctx, m) // room may have opened
	}
	return nil
}

// pollDue reports whether the poll alarm is set.
func (a *actor) pollDue(ctx *actors.Context) (time.Time, bool, error) {
	als, err := ctx.Alarms()
	if err != nil {
		return time.Time{}, false, err
	}
	for _, al := range als {
		if al.Name == "poll" {
			return al.Due, true, nil
		}
	}
	return time.Time{}, false, nil
}

// setLatest points the entity's latest anchored version at rec, unless a later version is
// there already.
func (a *actor) setLatest(ctx *actors.Context, rec record) error {
	type latest struct {
		EntityID string `json:"entity_id"`
		Ver      int64  `json:"ver"`
		CID      string `json:"cid"`
		TxID     string `json:"tx_id"`
		Seq      int64  `json:"seq"`
		TS       int64  `json:"ts"`
	}
	cur, found, err := load[latest](ctx, latestKey(rec.EntityID))
	if err != nil || (found && cur.Ver > rec.Ver) {
		return err
	}
	store(ctx, latestKey(rec.EntityID), latest{rec.EntityID, rec.Ver, rec.CID, rec.TxID, rec.Seq, rec.TS})
	return nil
}

// post posts the signed transaction of event seq (after this message commits).
func (a *actor) post(ctx *actors.Context, seq int64, tx *arweave.Tx) error {
	if a.inflight == nil {
		a.inflight = map[string]bool{}
	}
	a.inflight[tx.IDString()] = true
	gw, timeout := a.cfg.Gateway, a.cfg.CallTimeout
	return ctx.Effect("post:"+strconv.FormatInt(seq, 10)+":"+tx.IDString(), func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		return nil, gw.Post(c, tx)
	})
}

// observe records what the gateway said of event seq: mined deep enough is confirmed (its
// transaction bytes are no longer needed); unknown to the node is posted again with its
// same bytes.
func (a *actor) observe(ctx *actors.Context, seq int64, st polledState, height, resignFrom int64) (expired bool, err error) {
	rec, found, err := load[record](ctx, eventKey(seq))
	if err != nil || !found || rec.Status == StatusConfirmed || rec.TxID != st.TxID {
		return false, err // (asked about a transaction since replaced: nothing to learn)
	}
	state := st.State
	switch {
	case strings.HasPrefix(state, "mined:"):
		conf, _ := strconv.ParseInt(strings.TrimPrefix(state, "mined:"), 10, 64)
		rec.Status, rec.Mined = StatusPosted, true
		if conf >= a.cfg.Confirmations {
			rec.Status, rec.Tx = StatusConfirmed, nil
		}
		store(ctx, eventKey(seq), rec)
		if rec.Status == StatusConfirmed {
			v, _, err := load[version](ctx, versionKey(rec.EntityID, rec.Ver))
			if err != nil {
				return false, err
			}
			v.Status = StatusConfirmed
			store(ctx, versionKey(rec.EntityID, rec.Ver), v)
			a.cfg.Metrics.confirmed(rec.Accepted, ctx.Now())
		}
	case state == "pending" && rec.Mined:
		// Back in a mempool: a fork dropped the block that held it.
		rec.Mined = false
		store(ctx, eventKey(seq), rec)
		return a.expired(rec, height), a.dead(ctx, rec, height)
	case state == "pending" && a.expired(rec, height):
		// Waiting in a mempool past its anchor's validity: it can never be mined.
		return true, a.dead(ctx, rec, height)
	case state == "pending" && rec.Status == StatusSigned:
		rec.Status = StatusPosted
		store(ctx, eventKey(seq), rec)
	case state == "missing":
		// Unknown to the node: dropped from its mempool (or from a block a fork dropped), or
		// never taken. While its anchor is valid the same bytes are posted again; past it
		// (with a margin), the transaction can never be mined, and the event is signed again
		// (resign.go). Events after one to sign again are not posted: they will be too.
		if rec.Mined {
			rec.Mined = false
			store(ctx, eventKey(seq), rec)
		}
		if a.expired(rec, height) {
			return true, a.dead(ctx, rec, height)
		}
		if resignFrom > 0 && seq > resignFrom || a.inflight[rec.TxID] {
			return false, nil // to be signed again; or its post is still under way
		}
		var tx arweave.Tx
		if err := json.Unmarshal(rec.Tx, &tx); err != nil {
			return false, err
		}
		a.cfg.Metrics.reposted()
		return false, a.post(ctx, seq, &tx)
	}
	return false, nil
}

// polled is the result of the "poll" effect.
type polled struct {
	Height int64                 `json:"height"`
	States map[int64]polledState `json:"states"`
}

// polledState is what the node said of one event's transaction.
type polledState struct {
	TxID  string `json:"tx_id"`
	State string `json:"state"` // missing, unknown, pending, mined:<confirmations>
}

// pollParallel bounds the status questions of one poll asked at once; pollWindow the events
// one poll asks about.
const (
	pollParallel = 32
	pollWindow   = 512
)

// expiryMargin is how many blocks past its anchor's validity a transaction must be before it
// counts as never to be mined: a gateway's height may lag the network's.
const expiryMargin = 5

// expired reports whether rec's transaction can never be mined at height.
func (a *actor) expired(rec record, height int64) bool { return a.expiredAt(rec.AnchorHeight, height) }

// expiredAt reports whether a transaction whose anchor is at (at most) anchorHeight can never
// be mined at height.
func (a *actor) expiredAt(anchorHeight, height int64) bool {
	return height > anchorHeight+a.cfg.AnchorDepth+expiryMargin
}

// dead records that a poll saw rec's transaction unmined at height, past its anchor's
// validity: it can never be mined. (Not past it: nothing to record.)
func (a *actor) dead(ctx *actors.Context, rec record, height int64) error {
	if rec.ExpiredAt == 0 && a.expired(rec, height) {
		rec.ExpiredAt = height
		store(ctx, eventKey(rec.Seq), rec)
	}
	return nil
}

// advanceConfirmed moves confirmed_seq past every confirmed event that follows it.
func (a *actor) advanceConfirmed(ctx *actors.Context, m meta) (meta, error) {
	for m.ConfirmedSeq < m.Seq {
		rec, found, err := load[record](ctx, eventKey(m.ConfirmedSeq+1))
		if err != nil {
			return m, err
		}
		if !found || rec.Status != StatusConfirmed {
			break
		}
		if err := appendLeaf(ctx, rec); err != nil {
			return m, err
		}
		m.ConfirmedSeq++
		if a.cfg.LogSigner != nil && a.cfg.CheckpointEvery > 0 && m.ConfirmedSeq%a.cfg.CheckpointEvery == 0 {
			if m, err = a.anchorCheckpoint(ctx, m, m.ConfirmedSeq); err != nil {
				return m, err
			}
		}
	}
	return m, nil
}

// prepareFailed retries preparing with backoff; after MaxAttempts failures in a row the first
// queued event is marked failed — never signed, so the chain has no gap — and the chain goes
// on without it (retry requeues it).
func (a *actor) prepareFailed(ctx *actors.Context, m meta, cause error) error {
	m.Attempts++
	if m.Attempts >= MaxAttempts && m.ResignFrom == 0 { // (signing again: the queue waits anyway)
		m.Attempts = 0
		first, err := ctx.List(actors.ListOptions{Prefix: []byte("q/"), Limit: 1})
		if err != nil {
			return err
		}
		if len(first) == 1 {
			key := first[0].Value
			v, _, err := load[version](ctx, key)
			if err != nil {
				return err
			}
			v.Status, v.Error, v.Queue = StatusFailed, clip(cause.Error()), 0
			store(ctx, key, v)
			ctx.Put(failedKey(key), nil)
			ctx.Delete(first[0].Key)
			m.Queued--
			m.Failed++
			a.cfg.Metrics.event(eventFailed, 1)
		}
	}
	m.UpdatedAt = ctx.Now().UnixMilli()
	store(ctx, metaKey, m)
	backoff := min(a.cfg.PollInterval<<m.Attempts, time.Minute)
	a.retryAt = ctx.Now().Add(backoff) // not sooner, whatever arrives meanwhile
	return ctx.SetAlarm("pump", a.retryAt)
}

// clip bounds an error kept in storage and shown to clients.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
