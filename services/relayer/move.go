package relayer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/near"
)

// The key actor's dealings with the rest of the relayer, through Config.Caller (effects, never
// a handler: a handler waiting on another actor would hold its mailbox):
//
//   - moving: a key no longer configured cannot sign, so its queued intents move to the
//     account's remaining keys. Each is first taken off the queue and pinned to its target
//     (v/<idempotency key> → target public key) in a commit, so that it is never signed here
//     again (also if the key comes back meanwhile) and a retried move goes to the same target
//     (whose submit is idempotent); the move effect submits it there and points the index at
//     it, and its result deletes the pin and the record here. Only a target that answers that
//     it is not configured either (and so has no record) is picked again.
//   - forgetting: a record removed by retention leaves g/<idempotency key>; the forget effect
//     removes those index entries, and its result the g/ entries.
var (
	prefixMoving = []byte("v/")
	prefixForget = []byte("g/")
)

const (
	effectMove   = "move/" // + idempotency key
	effectForget = "forget"
	// moveBatch bounds the intents one message takes off the queue to move, and the index
	// entries one forget effect removes.
	moveBatch = 64
)

func movingKey(idem string) []byte { return append([]byte(string(prefixMoving)), idem...) }
func forgetKey(idem string) []byte { return append([]byte(string(prefixForget)), idem...) }

// moveRequest is what a moved intent is submitted to its target with: the original request
// and the record's creation time.
type moveRequest struct {
	SubmitRequest
	CreatedAt int64 `json:"created_at"`
}

// moveQueued pins up to moveBatch queued intents to the account's configured keys and starts
// their moves. It needs Config.Caller; with no key configured for the account they stay
// queued.
func (a *keyActor) moveQueued(ctx *actors.Context, queued int) error {
	keys := a.cfg.Keys.PublicKeys(a.account)
	if a.cfg.Caller == nil || len(keys) == 0 {
		return nil
	}
	next, err := ctx.List(actors.ListOptions{Prefix: prefixQueue, Limit: moveBatch})
	if err != nil {
		return err
	}
	for _, kv := range next {
		ctx.Delete(kv.Key)
		idem := string(kv.Value)
		to, _ := Assign(idem, keys)
		ctx.Put(movingKey(idem), []byte(to.String()))
		r, ok, err := loadRecord(ctx, idem)
		if err != nil {
			return err
		}
		if ok {
			a.move(ctx, r, to.String())
		}
	}
	queuedCount.Set(ctx, queued-len(next))
	return nil
}

// resumeMoves restarts the moves and the forget not under way in this activation.
func (a *keyActor) resumeMoves(ctx *actors.Context) error {
	if a.cfg.Caller == nil {
		return nil
	}
	moving, err := ctx.List(actors.ListOptions{Prefix: prefixMoving})
	if err != nil {
		return err
	}
	for _, kv := range moving {
		idem := strings.TrimPrefix(string(kv.Key), string(prefixMoving))
		r, ok, err := loadRecord(ctx, idem)
		if err != nil {
			return err
		}
		if !ok {
			ctx.Delete(kv.Key)
			continue
		}
		a.move(ctx, r, string(kv.Value))
	}
	return a.forgetIndexed(ctx)
}

// move submits r to the key to and points the index at it.
func (a *keyActor) move(ctx *actors.Context, r *record, to string) {
	pk, err := near.ParsePublicKey(to)
	if err != nil {
		return // written by moveQueued from a parsed key: cannot happen
	}
	req := moveRequest{SubmitRequest: SubmitRequest{IdempotencyKey: r.IdempotencyKey, ReceiverID: r.ReceiverID, Actions: r.Actions}, CreatedAt: r.CreatedAt}
	if r.SignedDelegate != nil {
		req.SignedDelegate = base64.StdEncoding.EncodeToString(r.SignedDelegate)
	}
	caller, timeout, from := a.cfg.Caller, a.cfg.CallTimeout, a.pk.String()
	a.request(ctx, effectMove+r.IdempotencyKey, func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		if err := callJSON(c, caller, KindName, ActorID(a.account, pk), methodAdopt, req, nil); err != nil {
			return nil, err
		}
		err := callJSON(c, caller, IndexKindName, IndexID(a.account, r.IdempotencyKey), MethodMove,
			MoveRequest{IdempotencyKey: r.IdempotencyKey, From: from, To: to}, nil)
		if err != nil && !isCode(err, "unknown_intent") {
			return nil, err
		}
		return nil, nil
	})
}

// onMove takes a move's result: done, the record is the target's now; refused by a target not
// configured, the intent is pinned to another key; otherwise the next poll tries again.
func (a *keyActor) onMove(ctx *actors.Context, res actors.EffectResult, idem string) error {
	if res.Err == nil {
		ctx.Delete(movingKey(idem))
		ctx.Delete(intentKey(idem))
		return nil
	}
	if isCode(res.Err, "unknown_relayer") {
		if to, ok := Assign(idem, a.cfg.Keys.PublicKeys(a.account)); ok {
			ctx.Put(movingKey(idem), []byte(to.String()))
		}
	}
	return nil
}

// forgetIndexed starts the removal of the index entries of removed records.
func (a *keyActor) forgetIndexed(ctx *actors.Context) error {
	if a.cfg.Caller == nil || a.busy[effectForget] {
		return nil
	}
	gone, err := ctx.List(actors.ListOptions{Prefix: prefixForget, Limit: moveBatch})
	if err != nil || len(gone) == 0 {
		return err
	}
	shards := map[string][]string{}
	for _, kv := range gone {
		idem := strings.TrimPrefix(string(kv.Key), string(prefixForget))
		id := IndexID(a.account, idem)
		shards[id] = append(shards[id], idem)
	}
	caller, timeout, key := a.cfg.Caller, a.cfg.CallTimeout, a.pk.String()
	a.request(ctx, effectForget, func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		var done []string
		for id, idems := range shards {
			if err := callJSON(c, caller, IndexKindName, id, MethodForget, ForgetRequest{Key: key, IdempotencyKeys: idems}, nil); err != nil {
				break
			}
			done = append(done, idems...)
		}
		return json.Marshal(done)
	})
	return nil
}

// onForget deletes the g/ entries whose index entries are gone, and goes on with the rest.
func (a *keyActor) onForget(ctx *actors.Context, res actors.EffectResult) error {
	if res.Err != nil {
		return nil
	}
	var done []string
	if err := json.Unmarshal(res.Output, &done); err != nil {
		return err
	}
	for _, idem := range done {
		ctx.Delete(forgetKey(idem))
	}
	if len(done) == 0 {
		return nil // the next poll tries again
	}
	return a.forgetIndexed(ctx)
}

// callJSON calls an actor with JSON in and out (out may be nil).
func callJSON(ctx context.Context, c actors.Caller, kind, id, method string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	reply, err := c.Call(ctx, kind, id, actors.Request{Method: method, Body: body})
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(reply, out)
}

// isCode reports whether err is the domain outcome code.
func isCode(err error, code string) bool {
	var e *actors.Error
	return errors.As(err, &e) && e.Code == code
}
