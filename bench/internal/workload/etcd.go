package workload

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/shardkeeper/shardkeeper/bench/internal/load"
)

// EtcdError is an answer of etcd's JSON gateway other than 200 OK.
type EtcdError struct {
	Status int
	Msg    string // the gateway's "error" (or "message") field, or the body
}

func (e *EtcdError) Error() string { return fmt.Sprintf("etcd: %d %s", e.Status, e.Msg) }

// Etcd calls a cluster through its v3 JSON gateway (grpc-gateway: JSON over HTTP, bytes in
// standard base64), round robin over the members' client URLs.
type Etcd struct {
	URLs   []string     // client URLs without a trailing slash
	Prefix string       // gateway path prefix: "/v3", "/v3beta" or "/v3alpha"
	HC     *http.Client // shared, with keep-alive
	next   atomic.Uint64
}

// Post sends body as JSON to path (after Prefix) on the next member and decodes the answer
// into out (nil: ignored).
func (e *Etcd) Post(ctx context.Context, path string, body, out any) error {
	return e.PostTo(ctx, e.URLs[int(e.next.Add(1)-1)%len(e.URLs)], path, body, out)
}

// PostTo is Post on the member at base.
func (e *Etcd) PostTo(ctx context.Context, base, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+e.Prefix+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := e.HC.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		var ge struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &ge) == nil && (ge.Error != "" || ge.Message != "") {
			msg = ge.Error
			if msg == "" {
				msg = ge.Message
			}
		}
		return &EtcdError{Status: res.StatusCode, Msg: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("etcd: decode %s answer: %w", path, err)
	}
	return nil
}

// GrantLease grants a lease of ttl seconds and returns its id (a decimal string, as the
// gateway encodes int64).
func (e *Etcd) GrantLease(ctx context.Context, ttl int) (string, error) {
	var out struct {
		ID    json.Number `json:"ID"`
		Error string      `json:"error"`
	}
	if err := e.Post(ctx, "/lease/grant", map[string]any{"TTL": ttl}, &out); err != nil {
		return "", err
	}
	if out.ID == "" || out.ID == "0" {
		return "", fmt.Errorf("etcd: lease grant returned no ID (error %q)", out.Error)
	}
	return out.ID.String(), nil
}

// etcdTxn is the body of /kv/txn (field names in the gateway's camelCase input form).
type etcdTxn struct {
	Compare []etcdCompare `json:"compare"`
	Success []etcdOp      `json:"success"`
}

type etcdCompare struct {
	Target         string  `json:"target"` // "CREATE" or "VALUE"; result EQUAL is the default
	Key            string  `json:"key"`
	CreateRevision *string `json:"createRevision,omitempty"`
	Value          *string `json:"value,omitempty"`
}

type etcdOp struct {
	RequestPut etcdPut `json:"requestPut"`
}

type etcdPut struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Lease string `json:"lease"`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// Txn runs the transaction "if every compare holds, put every put" and reports whether it
// did (the answer's "succeeded"; absent means false).
func (e *Etcd) txn(ctx context.Context, t etcdTxn) (bool, error) {
	var out struct {
		Succeeded bool `json:"succeeded"`
	}
	if err := e.Post(ctx, "/kv/txn", t, &out); err != nil {
		return false, err
	}
	return out.Succeeded, nil
}

// EtcdOracleOps returns the oracle workload against etcd: issue = one transaction
// "create_revision(nonce/<random>) == 0 → put nonce/<random> = org with the lease", consume =
// one transaction "value(nonce/<n>) == org and create_revision(used/<n>) == 0 → put used/<n> =
// request id with the lease". A transaction that does not succeed is an error. Nonces are 32
// random bytes in base64url, as the oracle's.
func EtcdOracleOps(e *Etcd, lease string, clients int) []load.Op {
	zero := "0"
	ops := make([]load.Op, clients)
	for i := range ops {
		org := orgOf(i)
		orgB64 := b64(org)
		var seed [32]byte
		_, _ = crand.Read(seed[:])
		rng := mrand.NewChaCha8(seed)
		var buf [32]byte
		ops[i] = func(ctx context.Context) error {
			_, _ = rng.Read(buf[:])
			nonce := base64.RawURLEncoding.EncodeToString(buf[:])
			_, _ = rng.Read(buf[:16])
			requestID := base64.RawURLEncoding.EncodeToString(buf[:16])
			nonceKey, usedKey := b64("nonce/"+nonce), b64("used/"+nonce)
			ok, err := e.txn(ctx, etcdTxn{
				Compare: []etcdCompare{{Target: "CREATE", Key: nonceKey, CreateRevision: &zero}},
				Success: []etcdOp{{RequestPut: etcdPut{Key: nonceKey, Value: orgB64, Lease: lease}}},
			})
			if err != nil {
				return err
			}
			if !ok {
				return errEtcdCollision
			}
			ok, err = e.txn(ctx, etcdTxn{
				Compare: []etcdCompare{
					{Target: "VALUE", Key: nonceKey, Value: &orgB64},
					{Target: "CREATE", Key: usedKey, CreateRevision: &zero},
				},
				Success: []etcdOp{{RequestPut: etcdPut{Key: usedKey, Value: b64(requestID), Lease: lease}}},
			})
			if err != nil {
				return err
			}
			if !ok {
				return errEtcdConsumeFailed
			}
			return nil
		}
	}
	return ops
}

var (
	errEtcdCollision     = errors.New("etcd: nonce collision (issue transaction did not succeed)")
	errEtcdConsumeFailed = errors.New("etcd: consume transaction did not succeed")
)
