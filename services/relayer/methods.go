package relayer

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// The key actor's request methods: submitting an intent, reading one, the key's status.

// submit queues a new intent, or returns the record of an identical earlier request.
func (a *keyActor) submit(ctx *actors.Context, req moveRequest) ([]byte, error) {
	c, err := req.check()
	if err != nil {
		return nil, err
	}
	if r, ok, err := loadRecord(ctx, c.idem); err != nil {
		return nil, err
	} else if ok {
		if string(r.RequestHash) != string(c.requestHash) {
			return nil, conflict(c.idem)
		}
		return json.Marshal(Submitted{Intent: r.Intent, Existed: true})
	}
	if a.signer == nil {
		return nil, actors.Errorf("unknown_relayer", "key %s of %s is not configured", a.pk, a.account)
	}
	m, err := loadMeta(ctx)
	if err != nil {
		return nil, err
	}
	if c.delegate != nil && m.Block != nil && c.maxBlock <= m.Block.Height {
		return nil, actors.Errorf("invalid_delegate", "signed_delegate expired at block %d (the chain is at %d)", c.maxBlock, m.Block.Height)
	}
	q, err := queuedCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	if q >= a.cfg.MaxQueued {
		return nil, &actors.Error{Code: "queue_full", Message: fmt.Sprintf("key %s of %s has %d intents queued", a.pk, a.account, q), RetryAfter: time.Second}
	}
	now := ctx.Now().UnixMilli()
	created := now
	if req.CreatedAt > 0 {
		created = req.CreatedAt
	}
	r := &record{
		Intent: Intent{IdempotencyKey: c.idem, AccountID: a.account, PublicKey: a.pk.String(), Status: StatusQueued,
			CreatedAt: created, UpdatedAt: now},
		ReceiverID: c.receiverID, Actions: c.actions, SignedDelegate: c.delegate, RequestHash: c.requestHash,
		Seq: m.NextSeq,
	}
	m.NextSeq++
	if err := putJSON(ctx, keyMeta, m); err != nil {
		return nil, err
	}
	ctx.Put(queueKey(r.Seq), []byte(c.idem))
	queuedCount.Set(ctx, q+1)
	a.met.event(eventAccepted)
	if err := putJSON(ctx, intentKey(c.idem), r); err != nil {
		return nil, err
	}
	if err := a.driveAndArm(ctx); err != nil {
		return nil, err
	}
	if r, _, err = loadRecord(ctx, c.idem); err != nil {
		return nil, err
	}
	return json.Marshal(Submitted{Intent: r.Intent})
}

// GetRequest is the body of MethodGet.
type GetRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
}

func (a *keyActor) get(ctx *actors.Context, req GetRequest) ([]byte, error) {
	r, ok, err := loadRecord(ctx, req.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	if !ok || (r.terminal() && r.RemoveAt <= ctx.Now().UnixMilli()) {
		return nil, unknownIntent(req.IdempotencyKey)
	}
	return json.Marshal(r.Intent)
}

// KeyStatus is the reply of MethodStatus.
type KeyStatus struct {
	PublicKey string    `json:"public_key"`
	NextNonce *uint64   `json:"next_nonce"`
	Queued    int       `json:"queued"`
	InFlight  int       `json:"in_flight"`
	LastError *KeyError `json:"last_error"`
}

func (a *keyActor) status(ctx *actors.Context) ([]byte, error) {
	m, err := loadMeta(ctx)
	if err != nil {
		return nil, err
	}
	q, err := queuedCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	inFlight, err := flightCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(KeyStatus{PublicKey: a.pk.String(), NextNonce: m.NextNonce, Queued: q, InFlight: inFlight, LastError: m.LastError})
}
