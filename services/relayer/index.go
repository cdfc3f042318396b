package relayer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
)

// The intent index, kind relayer-index: where each idempotency key of an account lives. An
// intent goes to a key by rendezvous hash (Assign), but the keys change with the
// configuration, so the first assignment is recorded here and a repeat is sent where the
// record is, not where the hash points today. The index of an account is spread over
// IndexShards actors, id "<account_id>/<shard>", by the idempotency key's hash, so that one
// account's submits are not one actor's.
//
// Storage: x/<idempotency key> → indexEntry (JSON). An entry is written before its record
// exists (claim, then the key's submit), so an entry may name a key that has no record of it
// yet: a repeat completes the submit there. Entries are removed when the key actor removes
// the record (forget), and follow a queued intent that moves to another key (move).

// IndexKindName is the index kind's name.
const IndexKindName = "relayer-index"

// IndexShards is the number of index actors of one account.
const IndexShards = 16

// The index's methods.
const (
	MethodClaim  = "claim"
	MethodLookup = "lookup"
	MethodMove   = "move"
	MethodForget = "forget"
)

var prefixIndex = []byte("x/")

// indexEntry is where an idempotency key lives: its key actor's public key, and the hash of
// the canonical request it was first submitted with.
type indexEntry struct {
	Key         string `json:"key"`
	RequestHash []byte `json:"request_hash"`
}

// IndexID is the id of the index actor holding idem of account.
func IndexID(account, idem string) string {
	sum := sha256.Sum256([]byte(idem))
	return fmt.Sprintf("%s/%d", account, binary.BigEndian.Uint32(sum[:4])%IndexShards)
}

// ClaimRequest records that idem goes to Key, unless it is recorded already.
type ClaimRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
	RequestHash    []byte `json:"request_hash"`
	Key            string `json:"key"`
}

// Placement is the reply of claim, lookup and move: the key idem lives on, and (lookup) the
// hash of the request it was first submitted with.
type Placement struct {
	Key         string `json:"key"`
	RequestHash []byte `json:"request_hash,omitempty"`
}

// MoveRequest moves idem from one key to another, if it is still recorded on From.
type MoveRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
	From           string `json:"from"`
	To             string `json:"to"`
}

// ForgetRequest removes the entries of IdempotencyKeys that are recorded on Key.
type ForgetRequest struct {
	Key             string   `json:"key"`
	IdempotencyKeys []string `json:"idempotency_keys"`
}

// IndexKind is the index kind.
func IndexKind() actors.Kind {
	return actors.Kind{Name: IndexKindName, New: func(string) actors.Handler { return indexActor{} }}
}

type indexActor struct{}

var indexMethods = actors.Dispatch[indexActor]{Name: "relayer index", Methods: map[string]actors.Method[indexActor]{
	MethodClaim:  actors.JSON(indexActor.claim),
	MethodLookup: actors.JSON(indexActor.lookup),
	MethodMove:   actors.JSON(indexActor.move),
	MethodForget: actors.JSON(indexActor.forget),
}}

func (a indexActor) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	return indexMethods.Receive(a, ctx, req)
}

func indexKey(idem string) []byte { return append([]byte(string(prefixIndex)), idem...) }

func (indexActor) claim(ctx *actors.Context, req ClaimRequest) ([]byte, error) {
	var e indexEntry
	ok, err := getJSON(ctx, indexKey(req.IdempotencyKey), &e)
	if err != nil {
		return nil, err
	}
	if ok {
		if string(e.RequestHash) != string(req.RequestHash) {
			return nil, conflict(req.IdempotencyKey)
		}
		return json.Marshal(Placement{Key: e.Key})
	}
	if req.Key == "" {
		return nil, fmt.Errorf("relayer index: claim without a key")
	}
	if err := putJSON(ctx, indexKey(req.IdempotencyKey), indexEntry{Key: req.Key, RequestHash: req.RequestHash}); err != nil {
		return nil, err
	}
	return json.Marshal(Placement{Key: req.Key})
}

func (indexActor) lookup(ctx *actors.Context, req GetRequest) ([]byte, error) {
	var e indexEntry
	ok, err := getJSON(ctx, indexKey(req.IdempotencyKey), &e)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, unknownIntent(req.IdempotencyKey)
	}
	return json.Marshal(Placement(e))
}

func (indexActor) move(ctx *actors.Context, req MoveRequest) ([]byte, error) {
	var e indexEntry
	ok, err := getJSON(ctx, indexKey(req.IdempotencyKey), &e)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, unknownIntent(req.IdempotencyKey)
	}
	if e.Key == req.From {
		e.Key = req.To
		if err := putJSON(ctx, indexKey(req.IdempotencyKey), e); err != nil {
			return nil, err
		}
	}
	return json.Marshal(Placement{Key: e.Key})
}

func (indexActor) forget(ctx *actors.Context, req ForgetRequest) ([]byte, error) {
	for _, idem := range req.IdempotencyKeys {
		var e indexEntry
		ok, err := getJSON(ctx, indexKey(idem), &e)
		if err != nil {
			return nil, err
		}
		if ok && e.Key == req.Key {
			ctx.Delete(indexKey(idem))
		}
	}
	return []byte("{}"), nil
}

func conflict(idem string) error {
	return actors.Errorf("idempotency_conflict", "idempotency_key %s was used with another body", ident.Quote(idem))
}

func unknownIntent(idem string) error {
	return actors.Errorf("unknown_intent", "no intent %s", ident.Quote(idem))
}
