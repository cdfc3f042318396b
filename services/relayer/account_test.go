package relayer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// accountEnv is an account's key actors and its index on the runtime over a fake chain,
// reached through the HTTP handlers (server) as a client would.
type accountEnv struct {
	t      *testing.T
	h      *actortest.Harness
	clock  *actortest.Clock
	chain  *fakeChain
	caller *api.LateCaller
	cfg    Config
	srv    *server
}

const testTimeout = 48 * time.Hour

func keysOf(t *testing.T, names ...string) *Keys {
	t.Helper()
	var ks []string
	for _, n := range names {
		ks = append(ks, fmt.Sprintf("%q", secretKey(n)))
	}
	keys, err := ParseKeys([]byte(fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%s]}]}`, relayAccount, strings.Join(ks, ","))))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// relayerCodes are the error codes the relayer's routes answer with on a node.
func relayerCodes(t *testing.T) *api.Codes {
	c, err := api.CoreCodes().With(codes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newAccountEnv(t *testing.T, keys *Keys, cfg Config) *accountEnv {
	t.Helper()
	e := &accountEnv{t: t, chain: newFakeChain(), caller: &api.LateCaller{}, clock: actortest.NewClock(time.Now().Add(time.Hour))}
	// Calls carry wall-clock deadlines, which the runtime reads by the fake clock: far enough
	// out for the clock's jumps.
	cfg.RPC, cfg.Caller, cfg.CallTimeout = e.chain, e.caller, testTimeout
	e.cfg = cfg
	e.h = actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: e.clock.Now}}, e.kinds(keys)...)
	e.caller.Set(e.h.Runtime)
	e.srv = newServer(e.caller, relayerCodes(e.t), testTimeout, keys)
	return e
}

func (e *accountEnv) kinds(keys *Keys) []actors.Kind {
	cfg := e.cfg
	cfg.Keys = keys
	return []actors.Kind{Kind(cfg), IndexKind()}
}

// reconfigure restarts the runtime with another keys file.
func (e *accountEnv) reconfigure(keys *Keys) {
	e.h.Restart(e.kinds(keys)...)
	e.caller.Set(e.h.Runtime)
	e.srv = newServer(e.caller, relayerCodes(e.t), testTimeout, keys)
}

func (e *accountEnv) do(method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req := httptest.NewRequest(method, path, rd)
	rec := httptest.NewRecorder()
	mux := http.NewServeMux()
	for _, r := range []api.Route{
		{Pattern: "POST /v1/relayers/{account_id}/intents", Handler: e.srv.submit},
		{Pattern: "GET /v1/relayers/{account_id}/intents/{idempotency_key}", Handler: e.srv.get},
		{Pattern: "GET /v1/relayers/{account_id}", Handler: e.srv.status},
	} {
		mux.Handle(r.Pattern, r.Handler)
	}
	mux.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func (e *accountEnv) post(req SubmitRequest) (int, Intent) {
	e.t.Helper()
	st, body := e.do("POST", "/v1/relayers/"+relayAccount+"/intents", req)
	var in Intent
	if st < 300 {
		if err := json.Unmarshal(body, &in); err != nil {
			e.t.Fatal(err)
		}
	}
	return st, in
}

func (e *accountEnv) read(idem string) (int, Intent) {
	e.t.Helper()
	st, body := e.do("GET", "/v1/relayers/"+relayAccount+"/intents/"+idem, nil)
	var in Intent
	if st == http.StatusOK {
		if err := json.Unmarshal(body, &in); err != nil {
			e.t.Fatal(err)
		}
	}
	return st, in
}

// pollAll fires the poll alarms of every key of the account that ever was.
func (e *accountEnv) pollAll(keys ...near.PublicKey) {
	e.clock.Advance(DefaultPollInterval)
	for _, pk := range keys {
		e.h.Wake(KindName, ActorID(relayAccount, pk))
	}
}

// Intents queued on a key that is removed from the configuration move to the account's
// remaining keys and land there once; a repeat and a read find them there; the removed key
// keeps nothing of them; and when retention removes a record its index entry goes too.
func TestQueuedIntentsMoveOffRemovedKey(t *testing.T) {
	both := keysOf(t, "a", "b")
	pks := both.PublicKeys(relayAccount)
	a, b := pks[0], pks[1]
	e := newAccountEnv(t, both, Config{Retention: time.Hour})
	e.chain.setNonce(b, 100) // a's nonce is unknown to the chain: its intents stay queued

	var onA, onB []string
	for i := 0; len(onA) < 4 || len(onB) < 2; i++ {
		idem := fmt.Sprint("pay:", i)
		if k, _ := Assign(idem, pks); k == a {
			if len(onA) == 4 {
				continue
			}
			onA = append(onA, idem)
		} else {
			if len(onB) == 2 {
				continue
			}
			onB = append(onB, idem)
		}
		if st, in := e.post(transfer(idem, "bob.near")); st != http.StatusCreated || in.PublicKey != map[bool]string{true: a.String(), false: b.String()}[len(onB) == 0 || onB[len(onB)-1] != idem] {
			_, raw := e.do("POST", "/v1/relayers/"+relayAccount+"/intents", transfer(idem, "bob.near"))
			t.Fatalf("post %s: %d %+v %s", idem, st, in, raw)
		}
	}
	for _, idem := range onA {
		if st, in := e.read(idem); st != http.StatusOK || in.Status != StatusQueued {
			t.Fatalf("%s before the change: %d %+v", idem, st, in)
		}
	}

	e.reconfigure(keysOf(t, "b"))
	for _, idem := range append(append([]string{}, onA...), onB...) {
		await.True(t, 10*time.Second, idem+" lands on b", func() bool {
			e.pollAll(a, b)
			st, in := e.read(idem)
			return st == http.StatusOK && in.Status == StatusSucceeded && in.PublicKey == b.String()
		})
	}
	if n := e.chain.landedCount(); n != len(onA)+len(onB) {
		t.Fatalf("%d transactions landed, want %d", n, len(onA)+len(onB))
	}
	st, in := e.post(transfer(onA[0], "bob.near"))
	if st != http.StatusOK || in.PublicKey != b.String() || in.Status != StatusSucceeded {
		t.Fatalf("repeat of a moved intent: %d %+v", st, in)
	}
	if st, _ := e.post(transfer(onA[0], "carol.near")); st != http.StatusConflict {
		t.Fatalf("another body under a moved key: %d, want 409", st)
	}
	await.True(t, 10*time.Second, "the removed key's storage emptied", func() bool {
		e.pollAll(a)
		for _, kv := range e.h.State(KindName, ActorID(relayAccount, a)).Data {
			if string(kv.Key) != "m" && string(kv.Key) != "c/queued" {
				return false
			}
		}
		return true
	})

	// Retention: the records and then their index entries go.
	e.clock.Advance(time.Hour + time.Second)
	for _, idem := range onA {
		await.True(t, 10*time.Second, idem+" forgotten", func() bool {
			e.pollAll(b)
			st, _ := e.read(idem)
			return st == http.StatusNotFound
		})
	}
	await.True(t, 10*time.Second, "no index entry left", func() bool {
		e.pollAll(b)
		for shard := range IndexShards {
			if len(e.h.State(IndexKindName, fmt.Sprintf("%s/%d", relayAccount, shard)).Data) > 0 {
				return false
			}
		}
		return true
	})
}

// A key with MaxQueued intents waiting refuses more with 429 queue_full and a Retry-After; a
// repeat of a queued one is still answered.
func TestQueueFull(t *testing.T) {
	keys := keysOf(t, "a")
	e := newAccountEnv(t, keys, Config{MaxQueued: 2}) // the key's nonce is unknown: nothing is signed
	for i := range 2 {
		if st, _ := e.post(transfer(fmt.Sprint("q:", i), "bob.near")); st != http.StatusCreated {
			t.Fatalf("post %d: %d", i, st)
		}
	}
	req := httptest.NewRequest("POST", "/v1/relayers/"+relayAccount+"/intents", strings.NewReader(`{"idempotency_key":"q:2","receiver_id":"bob.near","actions":[{"Transfer":{"deposit":"1"}}]}`))
	rec := httptest.NewRecorder()
	req.SetPathValue("account_id", relayAccount)
	e.srv.submit(rec, req)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"queue_full"`) {
		t.Fatalf("third post: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if st, in := e.post(transfer("q:1", "bob.near")); st != http.StatusOK || in.Status != StatusQueued {
		t.Fatalf("repeat while full: %d %+v", st, in)
	}
	if st, body := e.do("GET", "/v1/relayers/"+relayAccount, nil); st != http.StatusOK || !strings.Contains(string(body), `"queued":2`) || !strings.Contains(string(body), `"next_nonce":null`) {
		t.Fatalf("status: %d %s", st, body)
	}
	if st, _ := e.do("GET", "/v1/relayers/nobody.near", nil); st != http.StatusNotFound {
		t.Fatalf("unknown account: %d", st)
	}
}
