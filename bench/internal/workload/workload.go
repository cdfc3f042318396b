// Package workload holds the benchmark's operations: the domain workloads against shardkeeper
// through the client package, and the equivalent nonce workload against Redis over RESP.
// Each constructor returns one load.Op per client; an Op keeps per-client state and must run
// on one goroutine only.
package workload

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/load"
	"github.com/shardkeeper/shardkeeper/bench/internal/resp"
	"github.com/shardkeeper/shardkeeper/client"
)

// The workloads, by the names used in flags (short) and in results (long).
const (
	Oracle    = "oracle"
	Device    = "device"
	Heartbeat = "heartbeat"
)

// Names maps a workload's short name to its name in results.
var Names = map[string]string{
	Oracle:    "oracle_issue_consume",
	Device:    "device_challenge_verify",
	Heartbeat: "server_heartbeat",
}

// Registry is the device and server registry the workloads use.
const Registry = "bench"

const (
	orgCount      = 16
	redisNonceTTL = "3600000" // ms: the oracle's default lifetime, 1 h
)

func orgOf(client int) string { return "bench-org-" + strconv.Itoa(client%orgCount) }

// OracleOps returns the oracle workload's clients: one operation issues a nonce and consumes
// it (the client package sends a fresh request_id with each consume).
func OracleOps(c *client.Client, clients int) []load.Op {
	ops := make([]load.Op, clients)
	for i := range ops {
		org := orgOf(i)
		ops[i] = func(ctx context.Context) error {
			n, err := c.IssueNonce(ctx, org)
			if err != nil {
				return err
			}
			_, err = c.ConsumeNonce(ctx, n.Nonce, client.ConsumeRequest{OrgID: org})
			return err
		}
	}
	return ops
}

// Dev is a pre-registered device and its signing key.
type Dev struct {
	ID  string
	Key ed25519.PrivateKey
}

// RegisterDevices registers n devices with fresh Ed25519 keys in the bench registry, 16 at a
// time (with retries: this is setup, not measurement).
func RegisterDevices(ctx context.Context, urls []string, n int) ([]Dev, error) {
	c, err := client.New(urls)
	if err != nil {
		return nil, err
	}
	devs := make([]Dev, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range devs {
		pub, priv, err := ed25519.GenerateKey(crand.Reader)
		if err != nil {
			return nil, err
		}
		devs[i] = Dev{ID: fmt.Sprintf("bench-dev-%05d", i), Key: priv}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := c.RegisterDevice(ctx, Registry, client.RegisterDeviceRequest{
				DeviceID: devs[i].ID, Version: "1.0.0", Platform: "bench", BuildHash: "0000", PublicKey: pub})
			if err != nil {
				errs <- fmt.Errorf("register %s: %w", devs[i].ID, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return devs, nil
}

// DeviceOps returns the device workload's clients: one operation asks for a challenge and
// verifies it with a real Ed25519 signature. Client i cycles over devices i, i+clients,
// i+2·clients, ... (mod the pool).
func DeviceOps(c *client.Client, clients int, devs []Dev) []load.Op {
	ops := make([]load.Op, clients)
	for i := range ops {
		k := 0
		ops[i] = func(ctx context.Context) error {
			d := devs[(i+k*clients)%len(devs)]
			k++
			ch, err := c.Challenge(ctx, Registry, d.ID)
			if err != nil {
				return err
			}
			v, err := c.Verify(ctx, Registry, client.VerifyRequest{DeviceID: d.ID, Nonce: ch.Nonce, Signature: client.SignNonce(d.Key, ch.Nonce)})
			if err != nil {
				return err
			}
			if !v.Verified {
				return errors.New("verify answered verified=false")
			}
			return nil
		}
	}
	return ops
}

// HeartbeatOps returns the heartbeat workload's clients: one operation is a PUT heartbeat;
// client i rotates over server ids i, i+clients, ... (mod pool) of the bench registry.
func HeartbeatOps(c *client.Client, clients, pool int) []load.Op {
	ops := make([]load.Op, clients)
	for i := range ops {
		k := 0
		ops[i] = func(ctx context.Context) error {
			id := fmt.Sprintf("srv-%05d", (i+k*clients)%pool)
			k++
			_, err := c.PutServer(ctx, Registry, id, client.PutServerRequest{Address: "10.0.0.1:7000", Region: "bench"})
			return err
		}
	}
	return ops
}

// ConsumeScript atomically consumes nonce KEYS[1] for org ARGV[1] with request id ARGV[2],
// with the oracle's outcomes as error codes: UNKNOWN_NONCE, NONCE_USED (unless the same
// request id used it: success again), ORG_MISMATCH. An unused nonce's value is its org; consuming replaces
// it by "u|<org>|<request id>", keeping its expiry. Returns 1.
const ConsumeScript = `
local v = redis.call('GET', KEYS[1])
if not v then return redis.error_reply('UNKNOWN_NONCE nonce never issued or gone') end
local org, rid = string.match(v, '^u|([^|]*)|(.*)$')
if org then
  if org == ARGV[1] and rid == ARGV[2] then return 1 end
  return redis.error_reply('NONCE_USED nonce already used')
end
if v ~= ARGV[1] then return redis.error_reply('ORG_MISMATCH nonce of another organisation') end
redis.call('SET', KEYS[1], 'u|' .. v .. '|' .. ARGV[2], 'KEEPTTL')
return 1
`

// RedisOracleOps returns the oracle workload against Redis, one connection per client: issue =
// SET nonce:<random> <org> NX PX <ttl>, consume = EVALSHA of ConsumeScript with a fresh
// request id. Nonces are 32 random bytes in base64url, as the oracle's. closeAll closes the
// connections once the run is over.
func RedisOracleOps(addr, sha string, clients int, timeout time.Duration) (ops []load.Op, closeAll func()) {
	ops = make([]load.Op, clients)
	conns := make([]*resp.Conn, clients)
	for i := range ops {
		org := orgOf(i)
		var seed [32]byte
		_, _ = crand.Read(seed[:])
		rng := mrand.NewChaCha8(seed)
		var buf [32]byte
		ops[i] = func(ctx context.Context) error {
			if conns[i] == nil {
				c, err := resp.Dial(ctx, addr, timeout)
				if err != nil {
					return err
				}
				conns[i] = c
			}
			conn := conns[i]
			_, _ = rng.Read(buf[:])
			key := "nonce:" + base64.RawURLEncoding.EncodeToString(buf[:])
			_, _ = rng.Read(buf[:16])
			requestID := base64.RawURLEncoding.EncodeToString(buf[:16])
			v, err := conn.Do("SET", key, org, "NX", "PX", redisNonceTTL)
			if err == nil && v.Null {
				err = errors.New("nonce collision")
			}
			if err == nil {
				v, err = conn.Do("EVALSHA", sha, "1", key, org, requestID)
				if err == nil && v.Int != 1 {
					err = fmt.Errorf("consume answered %+v", v)
				}
			}
			var se *resp.ServerError
			if err != nil && !errors.As(err, &se) {
				_ = conn.Close() // out of step: reconnect on the next operation
				conns[i] = nil
			}
			return err
		}
	}
	return ops, func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}
}

// Classify names an error for the error counts.
func Classify(err error) string {
	var apiErr *client.APIError
	var se *resp.ServerError
	var etcdErr *EtcdError
	switch {
	case errors.As(err, &apiErr):
		if apiErr.Code != "" {
			return strconv.Itoa(apiErr.Status) + " " + apiErr.Code
		}
		return strconv.Itoa(apiErr.Status) + " " + http.StatusText(apiErr.Status)
	case errors.As(err, &se):
		return "redis " + strings.SplitN(se.Msg, " ", 2)[0]
	case errors.As(err, &etcdErr):
		msg := etcdErr.Msg
		if len(msg) > 60 {
			msg = msg[:60] + "…"
		}
		return "etcd " + strconv.Itoa(etcdErr.Status) + " " + msg
	case errors.Is(err, errEtcdCollision):
		return "etcd issue txn not succeeded"
	case errors.Is(err, errEtcdConsumeFailed):
		return "etcd consume txn not succeeded"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		msg := err.Error()
		if len(msg) > 100 {
			msg = msg[:100] + "…"
		}
		return "transport: " + msg
	}
}
