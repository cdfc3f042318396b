package near

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The RPC tests run the client against httptest servers that answer with nearcore's own
// response and error shapes, kept as files in testdata/rpc.

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      string          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// fakeNode is an RPC endpoint whose answers the test scripts. It counts the requests it got.
type fakeNode struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	hits   int
	answer func(w http.ResponseWriter, r *http.Request, req rpcRequest)
}

func newFakeNode(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, req rpcRequest)) *fakeNode {
	t.Helper()
	n := &fakeNode{t: t, answer: answer}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.hits++
		n.mu.Unlock()
		var req rpcRequest
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.JSONRPC != "2.0" || req.ID == "" {
			t.Errorf("not a JSON-RPC 2.0 request: %+v, %v", req, err)
		}
		n.answer(w, r, req)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *fakeNode) Hits() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hits
}

// replyFile answers with testdata/rpc/<file>, its id replaced by the request's as a node
// echoes it.
func replyFile(t *testing.T, w http.ResponseWriter, req rpcRequest, status int, file string) {
	t.Helper()
	data, err := os.ReadFile("testdata/rpc/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	msg["id"], _ = json.Marshal(req.ID)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(msg)
}

// fileNode always answers with file (HTTP 200).
func fileNode(t *testing.T, file string) *fakeNode {
	return newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
		replyFile(t, w, req, http.StatusOK, file)
	})
}

func newTestClient(t *testing.T, urls []string, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(urls, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func params(t *testing.T, req rpcRequest) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(req.Params, &p); err != nil {
		t.Fatalf("params %s: %v", req.Params, err)
	}
	return p
}

// signedVector returns the signed bytes and hash of a golden transaction.
func signedVector(t *testing.T, name string) ([]byte, Hash) {
	t.Helper()
	for _, tv := range loadVectors(t).Transactions {
		if tv.Name == name {
			h, err := ParseHash(tv.Hash)
			if err != nil {
				t.Fatal(err)
			}
			return mustB64(t, tv.Signed), h
		}
	}
	t.Fatalf("no vector %s", name)
	return nil, Hash{}
}

func TestBlock(t *testing.T) {
	node := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
		if p := params(t, req); req.Method != "block" || p["finality"] != "optimistic" || len(p) != 1 {
			t.Errorf("request %s %v", req.Method, p)
		}
		replyFile(t, w, req, http.StatusOK, "block.json")
	})
	c := newTestClient(t, []string{node.srv.URL})
	b, err := c.Block(context.Background(), FinalityOptimistic)
	if err != nil {
		t.Fatal(err)
	}
	if b.Height != 190000200 || b.Hash.String() != "8mXQm4N1iYkfAunShpjtuPSaSBCwqZYJvgfMNGVu2JQJ" {
		t.Fatalf("block %d %s", b.Height, b.Hash)
	}
	if _, err := c.Block(context.Background(), "latest"); err == nil || node.Hits() != 1 {
		t.Fatalf("finality latest: %v after %d requests", err, node.Hits())
	}
}

func TestViewAccessKey(t *testing.T) {
	relayer, err := ParsePublicKey("ed25519:5pZb3yzkUyCnkRnMLaGP9SLVYJTE73P7Fa3YkMfG9ZiA")
	if err != nil {
		t.Fatal(err)
	}
	query := func(t *testing.T, file string) (AccessKeyView, error) {
		node := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
			p := params(t, req)
			if req.Method != "query" || p["request_type"] != "view_access_key" || p["finality"] != "final" ||
				p["account_id"] != "relayer.testnet" || p["public_key"] != relayer.String() {
				t.Errorf("request %s %v", req.Method, p)
			}
			replyFile(t, w, req, http.StatusOK, file)
		})
		return newTestClient(t, []string{node.srv.URL}).ViewAccessKey(context.Background(), "relayer.testnet", relayer, FinalityFinal)
	}

	t.Run("full access", func(t *testing.T) {
		k, err := query(t, "view_access_key.json")
		if err != nil {
			t.Fatal(err)
		}
		if k.Nonce != 153000000000887 || !k.Permission.FullAccess || k.Permission.FunctionCall != nil ||
			k.BlockHeight != 190000198 || k.BlockHash.String() != "EiC9fDWJrVqs1mxHcaKDm5vFnHPy2ANqNo8aY5LNSgz8" {
			t.Fatalf("%+v", k)
		}
	})
	t.Run("function call", func(t *testing.T) {
		k, err := query(t, "view_access_key_function_call.json")
		if err != nil {
			t.Fatal(err)
		}
		fc := k.Permission.FunctionCall
		if k.Nonce != 85 || k.Permission.FullAccess || fc == nil || fc.Allowance == nil ||
			fc.Allowance.String() != "18501534631167209000000000" || fc.ReceiverID != "client.chainlink.testnet" ||
			len(fc.MethodNames) != 1 || fc.MethodNames[0] != "get_token_price" {
			t.Fatalf("%+v %+v", k, fc)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		_, err := query(t, "view_access_key_unknown.json")
		var uk *UnknownAccessKeyError
		if !errors.As(err, &uk) || uk.PublicKey != relayer.String() || uk.BlockHeight != 190000198 {
			t.Fatalf("%v (%T)", err, err)
		}
		if IsOutcomeUnknown(err) || IsRefused(err) {
			t.Fatalf("a missing key is a definite answer: %v", err)
		}
	})
	t.Run("unknown account", func(t *testing.T) {
		_, err := query(t, "error_unknown_account.json")
		var ua *UnknownAccountError
		if !errors.As(err, &ua) || ua.AccountID != "nobody.testnet" || ua.BlockHeight != 190000198 {
			t.Fatalf("%v (%T)", err, err)
		}
	})
}

func TestSendTx(t *testing.T) {
	signed, hash := signedVector(t, "function_call")
	sendTo := func(t *testing.T, file string, wait TxExecutionStatus) (*TxOutcome, error) {
		node := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
			p := params(t, req)
			if req.Method != "send_tx" || p["wait_until"] != string(wait) || len(p) != 2 {
				t.Errorf("request %s %v", req.Method, p)
			}
			// What a node does first: decode and check the signature.
			raw, _ := base64.StdEncoding.DecodeString(p["signed_tx_base64"].(string))
			st, err := DecodeSignedTransaction(raw)
			if err != nil {
				t.Errorf("node cannot decode the transaction: %v", err)
			} else if h, err := st.Verify(); err != nil || h != hash || !bytes.Equal(raw, signed) {
				t.Errorf("node got %s (%v), want %s", h, err, hash)
			}
			replyFile(t, w, req, http.StatusOK, file)
		})
		return newTestClient(t, []string{node.srv.URL}).SendTx(context.Background(), signed, wait)
	}

	t.Run("none", func(t *testing.T) {
		o, err := sendTo(t, "send_tx_none.json", TxNone)
		if err != nil {
			t.Fatal(err)
		}
		if o.FinalExecutionStatus != TxNone || o.Status != nil || o.Kind() != OutcomePending || o.TransactionHash != nil {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("final success", func(t *testing.T) {
		o, err := sendTo(t, "send_tx_final_success.json", TxFinal)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := o.SuccessValue()
		if o.FinalExecutionStatus != TxFinal || o.Kind() != OutcomeSucceeded || !ok || len(v) != 0 || o.Failure() != nil {
			t.Fatalf("%+v", o)
		}
		if o.TransactionHash == nil || o.TransactionHash.String() != "ASS7oYwGiem9HaNwJe6vS2kznx2CxueKDvU9BAYJRjNR" {
			t.Fatalf("hash %v", o.TransactionHash)
		}
		if !jsonEqual(t, o.Status, []byte(`{"SuccessValue":""}`)) {
			t.Fatalf("status %s", o.Status)
		}
	})
	t.Run("unknown wait level", func(t *testing.T) {
		c := newTestClient(t, []string{"http://127.0.0.1:1"})
		if _, err := c.SendTx(context.Background(), signed, "SOON"); err == nil || IsOutcomeUnknown(err) {
			t.Fatalf("wait_until SOON: %v", err)
		}
	})
}

func TestTxStatus(t *testing.T) {
	signed, hash := signedVector(t, "function_call")
	cases := []struct {
		name   string
		query  TxQuery
		method string
		want   map[string]any
	}{
		{"by hash", TxQuery{Hash: hash, SenderID: "relayer.testnet", WaitUntil: TxExecuted}, "tx",
			map[string]any{"tx_hash": hash.String(), "sender_account_id": "relayer.testnet", "wait_until": "EXECUTED"}},
		{"receipts, node's wait level", TxQuery{Hash: hash, SenderID: "relayer.testnet", Receipts: true}, "EXPERIMENTAL_tx_status",
			map[string]any{"tx_hash": hash.String(), "sender_account_id": "relayer.testnet"}},
		{"by signed transaction", TxQuery{SignedTx: signed, WaitUntil: TxNone}, "tx",
			map[string]any{"signed_tx_base64": base64.StdEncoding.EncodeToString(signed), "wait_until": "NONE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
				if p := params(t, req); req.Method != tc.method || !jsonEqual(t, req.Params, mustJSON(t, tc.want)) {
					t.Errorf("request %s %v", req.Method, p)
				}
				replyFile(t, w, req, http.StatusOK, "tx_executed_failure.json")
			})
			o, err := newTestClient(t, []string{node.srv.URL}).TxStatus(context.Background(), tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if o.Kind() != OutcomeFailed || o.FinalExecutionStatus != TxExecuted || *o.TransactionHash != hash {
				t.Fatalf("%+v", o)
			}
			if _, ok := o.SuccessValue(); ok || !strings.Contains(string(o.Failure()), "Smart contract panicked") {
				t.Fatalf("failure %s", o.Failure())
			}
		})
	}
	c := newTestClient(t, []string{"http://127.0.0.1:1"})
	if _, err := c.TxStatus(context.Background(), TxQuery{Hash: hash}); err == nil {
		t.Fatal("a status query without sender was sent")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTypedErrors sends a transaction to nodes answering each of nearcore's error shapes and
// checks the typed error, and how the predicates classify it.
func TestTypedErrors(t *testing.T) {
	signed, _ := signedVector(t, "function_call")
	type verdict struct{ refused, stale, unknown bool }
	cases := []struct {
		file  string
		check func(error) bool
		want  verdict
	}{
		{"error_invalid_nonce.json", func(err error) bool {
			var e *InvalidNonceError
			return errors.As(err, &e) && e.TxNonce == 153000000000001 && e.AkNonce == 153000000000887
		}, verdict{refused: true, stale: true}},
		{"error_legacy_invalid_nonce.json", func(err error) bool {
			var e *InvalidNonceError
			return errors.As(err, &e) && e.TxNonce == 7 && e.AkNonce == 9
		}, verdict{refused: true, stale: true}},
		{"error_nonce_too_large.json", func(err error) bool {
			var e *NonceTooLargeError
			return errors.As(err, &e) && e.TxNonce == 9007199254740993 && e.UpperBound == 190000200000000
		}, verdict{refused: true, stale: true}},
		{"error_expired.json", func(err error) bool {
			var e *ExpiredError
			return errors.As(err, &e)
		}, verdict{refused: true, stale: true}},
		{"error_invalid_chain.json", func(err error) bool {
			var e *InvalidTxError
			return errors.As(err, &e) && e.Name == "InvalidChain"
		}, verdict{refused: true, stale: true}},
		{"error_invalid_signature.json", func(err error) bool {
			var e *InvalidSignatureError
			return errors.As(err, &e)
		}, verdict{refused: true}},
		{"error_not_enough_balance.json", func(err error) bool {
			var e *NotEnoughBalanceError
			return errors.As(err, &e) && e.SignerID == "relayer.testnet" &&
				e.Balance.String() == "1180000000000000000000" && e.Cost.String() == "340282366920938463463374607431768211455"
		}, verdict{refused: true}},
		{"error_invalid_receiver_id.json", func(err error) bool {
			var e *InvalidReceiverIDError
			return errors.As(err, &e) && e.ReceiverID == "Bob.Testnet"
		}, verdict{refused: true}},
		{"error_signer_does_not_exist.json", func(err error) bool {
			var e *SignerDoesNotExistError
			return errors.As(err, &e) && e.SignerID == "relayer.testnet"
		}, verdict{refused: true}},
		{"error_invalid_access_key.json", func(err error) bool {
			var e *InvalidAccessKeyError
			return errors.As(err, &e) && e.Kind == "AccessKeyNotFound" && strings.Contains(string(e.Detail), `"account_id"`)
		}, verdict{refused: true}},
		{"error_shard_congested.json", func(err error) bool {
			var e *InvalidTxError
			return errors.As(err, &e) && e.Name == "ShardCongested" && strings.Contains(string(e.Detail), "congestion_level")
		}, verdict{refused: true}},
		{"error_timeout.json", func(err error) bool {
			var e *TimeoutError
			return errors.As(err, &e) && e.Cause == ""
		}, verdict{unknown: true}},
		{"error_timeout_not_observed.json", func(err error) bool {
			var e *TimeoutError
			return errors.As(err, &e) && e.Cause == "NOT_OBSERVED"
		}, verdict{unknown: true}},
		{"error_legacy_timeout.json", func(err error) bool {
			var e *TimeoutError
			return errors.As(err, &e)
		}, verdict{unknown: true}},
		{"error_internal.json", func(err error) bool {
			var e *InternalError
			return errors.As(err, &e) && strings.Contains(e.Message, "InternalError")
		}, verdict{unknown: true}},
		{"error_unknown_transaction.json", func(err error) bool {
			var e *UnknownTransactionError
			return errors.As(err, &e) && e.Hash == "BTP5KQCnwLJwyueJy4MyHsStX6mWwnzmk6eLDV4ESYbW"
		}, verdict{}},
		{"error_parse.json", func(err error) bool {
			var e *RPCError
			return errors.As(err, &e) && e.Name == "REQUEST_VALIDATION_ERROR" && e.Cause == "PARSE_ERROR" &&
				e.Code == -32700 && e.Unwrap() == nil
		}, verdict{}},
	}
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			node := fileNode(t, tc.file)
			_, err := newTestClient(t, []string{node.srv.URL}).SendTx(context.Background(), signed, TxExecutedOptimistic)
			if err == nil || !tc.check(err) {
				t.Fatalf("error %v (%T)", err, err)
			}
			var re *RPCError
			if !errors.As(err, &re) || re.Method != "send_tx" {
				t.Fatalf("not an *RPCError of send_tx: %v", err)
			}
			got := verdict{refused: IsRefused(err), stale: IsStale(err), unknown: IsOutcomeUnknown(err)}
			if got != tc.want {
				t.Fatalf("%v: refused/stale/unknown %+v, want %+v", err, got, tc.want)
			}
			var it InvalidTx
			if errors.As(err, &it) != tc.want.refused {
				t.Fatalf("InvalidTx found: %v, want %v", !tc.want.refused, tc.want.refused)
			}
			if node.Hits() != 1 {
				t.Fatalf("%d requests for one answer", node.Hits())
			}
		})
	}
}

// TestOutcomeUnknown covers the failures after which a transaction may or may not have been
// accepted, and the few that are not.
func TestOutcomeUnknown(t *testing.T) {
	signed, _ := signedVector(t, "function_call")
	status := func(code int) func(http.ResponseWriter, *http.Request, rpcRequest) {
		return func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) { w.WriteHeader(code) }
	}
	fileWith := func(code int, file string) func(http.ResponseWriter, *http.Request, rpcRequest) {
		return func(w http.ResponseWriter, _ *http.Request, req rpcRequest) { replyFile(t, w, req, code, file) }
	}
	body := func(s string) func(http.ResponseWriter, *http.Request, rpcRequest) {
		return func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) { _, _ = w.Write([]byte(s)) }
	}
	cases := []struct {
		name    string
		answer  func(http.ResponseWriter, *http.Request, rpcRequest)
		unknown bool
		check   func(error) bool
	}{
		{"408", status(http.StatusRequestTimeout), true, statusIs(408)},
		{"408 with TIMEOUT_ERROR", fileWith(http.StatusRequestTimeout, "error_timeout.json"), true, func(err error) bool {
			var e *TimeoutError
			return errors.As(err, &e) && statusIs(408)(err)
		}},
		{"429", status(http.StatusTooManyRequests), true, statusIs(429)},
		{"500 with INTERNAL_ERROR", fileWith(http.StatusInternalServerError, "error_internal.json"), true, func(err error) bool {
			var e *InternalError
			return errors.As(err, &e)
		}},
		{"502 with a refusal", fileWith(http.StatusBadGateway, "error_invalid_nonce.json"), true, func(err error) bool {
			var e *InvalidNonceError
			return errors.As(err, &e) && !IsRefused(err) // a gateway's word is not the node's
		}},
		{"503", status(http.StatusServiceUnavailable), true, statusIs(503)},
		{"closed connection", func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		}, true, statusIs(0)},
		{"body cut short", func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","result":{"final_exec`))
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, true, statusIs(200)},
		{"not JSON", body("<html>bad gateway</html>"), true, statusIs(200)},
		{"no result", body(`{"jsonrpc":"2.0","id":"1"}`), true, statusIs(200)},
		{"result without status", func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{}})
		}, true, statusIs(200)},
		{"another request's id", func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID + "0", "result": map[string]any{"final_execution_status": "NONE"}})
		}, true, statusIs(200)},
		{"404 from a proxy", status(http.StatusNotFound), false, statusIs(404)},
		{"400 with PARSE_ERROR", fileWith(http.StatusBadRequest, "error_parse.json"), false, func(err error) bool {
			var e *RPCError
			var te *TransportError
			return errors.As(err, &e) && e.Cause == "PARSE_ERROR" && !errors.As(err, &te)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeNode(t, tc.answer)
			_, err := newTestClient(t, []string{node.srv.URL}).SendTx(context.Background(), signed, TxIncluded)
			if err == nil || !tc.check(err) {
				t.Fatalf("error %v", err)
			}
			if IsOutcomeUnknown(err) != tc.unknown || IsRefused(err) {
				t.Fatalf("%v: unknown %v (want %v), refused %v", err, IsOutcomeUnknown(err), tc.unknown, IsRefused(err))
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		node := newFakeNode(t, func(w http.ResponseWriter, r *http.Request, _ rpcRequest) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		c := newTestClient(t, []string{node.srv.URL}, WithHTTPClient(&http.Client{Timeout: 100 * time.Millisecond}))
		_, err := c.SendTx(context.Background(), signed, TxIncluded)
		if !IsOutcomeUnknown(err) || IsRefused(err) || !statusIs(0)(err) {
			t.Fatalf("%v", err)
		}
	})
}

// statusIs reports whether err holds a *TransportError with that HTTP status.
func statusIs(code int) func(error) bool {
	return func(err error) bool {
		var te *TransportError
		return errors.As(err, &te) && te.StatusCode == code
	}
}

// fakeClock is a settable clock for the cool-down.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestFailover(t *testing.T) {
	t.Run("skips a failed endpoint until its cool-down ends", func(t *testing.T) {
		down := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		up := fileNode(t, "block.json")
		clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
		c := newTestClient(t, []string{down.srv.URL, up.srv.URL}, WithCooldown(time.Minute), withClock(clock.Now))
		ctx := context.Background()

		if _, err := c.Block(ctx, FinalityFinal); err != nil {
			t.Fatal(err)
		}
		if down.Hits() != 1 || up.Hits() != 1 {
			t.Fatalf("first call: %d, %d requests", down.Hits(), up.Hits())
		}
		if _, err := c.Block(ctx, FinalityFinal); err != nil {
			t.Fatal(err)
		}
		if down.Hits() != 1 || up.Hits() != 2 {
			t.Fatalf("in the cool-down the failed endpoint was asked: %d, %d requests", down.Hits(), up.Hits())
		}
		clock.Advance(time.Minute)
		if _, err := c.Block(ctx, FinalityFinal); err != nil {
			t.Fatal(err)
		}
		if down.Hits() != 2 || up.Hits() != 3 {
			t.Fatalf("after the cool-down: %d, %d requests", down.Hits(), up.Hits())
		}
	})

	t.Run("an endpoint in cool-down is still tried last", func(t *testing.T) {
		var mu sync.Mutex
		failing := true
		flaky := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
			mu.Lock()
			f := failing
			mu.Unlock()
			if f {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			replyFile(t, w, req, http.StatusOK, "block.json")
		})
		dead := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		c := newTestClient(t, []string{flaky.srv.URL, dead.srv.URL})
		_, err := c.Block(context.Background(), FinalityFinal)
		if !IsOutcomeUnknown(err) || !strings.Contains(err.Error(), flaky.srv.URL) || !strings.Contains(err.Error(), dead.srv.URL) {
			t.Fatalf("every endpoint failed: %v", err)
		}
		mu.Lock()
		failing = false
		mu.Unlock()
		if _, err := c.Block(context.Background(), FinalityFinal); err != nil {
			t.Fatalf("both endpoints cooling, the flaky one recovered: %v", err)
		}
	})

	t.Run("a node's error answer ends the call", func(t *testing.T) {
		first := fileNode(t, "error_unknown_transaction.json")
		second := fileNode(t, "tx_executed_failure.json")
		c := newTestClient(t, []string{first.srv.URL, second.srv.URL})
		_, err := c.TxStatus(context.Background(), TxQuery{SenderID: "relayer.testnet", WaitUntil: TxNone})
		var ut *UnknownTransactionError
		if !errors.As(err, &ut) || IsOutcomeUnknown(err) || second.Hits() != 0 {
			t.Fatalf("%v; second endpoint asked %d times", err, second.Hits())
		}
	})

	t.Run("a refusal after a lost send is not proof", func(t *testing.T) {
		signed, _ := signedVector(t, "function_call")
		lost := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		})
		refusing := fileNode(t, "error_expired.json")
		c := newTestClient(t, []string{lost.srv.URL, refusing.srv.URL})
		_, err := c.SendTx(context.Background(), signed, TxExecutedOptimistic)
		var ex *ExpiredError
		if !errors.As(err, &ex) || !IsOutcomeUnknown(err) || IsRefused(err) || IsStale(err) {
			t.Fatalf("%v: refused %v, unknown %v", err, IsRefused(err), IsOutcomeUnknown(err))
		}
		if lost.Hits() != 1 || refusing.Hits() != 1 {
			t.Fatalf("%d, %d requests", lost.Hits(), refusing.Hits())
		}
	})

	t.Run("a canceled call does not put the endpoint in cool-down", func(t *testing.T) {
		var mu sync.Mutex
		calls := 0
		slow := newFakeNode(t, func(w http.ResponseWriter, r *http.Request, req rpcRequest) {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			if first {
				<-r.Context().Done()
				return
			}
			replyFile(t, w, req, http.StatusOK, "block.json")
		})
		other := fileNode(t, "block.json")
		c := newTestClient(t, []string{slow.srv.URL, other.srv.URL})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := c.Block(ctx, FinalityFinal); !IsOutcomeUnknown(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v", err)
		}
		if other.Hits() != 0 {
			t.Fatal("the call went on after its context ended")
		}
		if _, err := c.Block(context.Background(), FinalityFinal); err != nil {
			t.Fatal(err)
		}
		if slow.Hits() != 2 || other.Hits() != 0 {
			t.Fatalf("the first endpoint was put in cool-down: %d, %d requests", slow.Hits(), other.Hits())
		}
	})
}

func TestClientKeepsEndpointSecretsOutOfErrors(t *testing.T) {
	node := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	u := strings.Replace(node.srv.URL, "http://", "http://user:hunter2@", 1) + "/rpc?apikey=s3cr3t"
	c := newTestClient(t, []string{u})
	_, err := c.Block(context.Background(), FinalityFinal)
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") ||
		!strings.Contains(err.Error(), strings.TrimPrefix(node.srv.URL, "http://")+"/rpc") {
		t.Fatalf("%v", err)
	}
	// A connection refused: net/http's *url.Error would repeat the whole URL.
	c = newTestClient(t, []string{"http://user:hunter2@127.0.0.1:1/?apikey=s3cr3t"})
	if _, err := c.Block(context.Background(), FinalityFinal); err == nil ||
		strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("%v", err)
	}
	if _, err := NewClient([]string{"ftp://user:hunter2@host/?apikey=s3cr3t"}); err == nil ||
		strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("%v", err)
	}
}

func TestNewClientChecksURLs(t *testing.T) {
	for _, urls := range [][]string{nil, {""}, {"localhost:3030"}, {"ftp://rpc.example"}, {"http://"}} {
		if _, err := NewClient(urls); err == nil {
			t.Errorf("%q accepted", urls)
		}
	}
	if _, err := NewClient([]string{"https://rpc.mainnet.near.org", "http://127.0.0.1:3030"}); err != nil {
		t.Fatal(err)
	}
}

// The observer sees every request to every endpoint: its method, the endpoint without its
// secrets, and whether it brought a result, a node's error or no answer.
func TestObserver(t *testing.T) {
	down := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	})
	var calls int
	up := newFakeNode(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
		calls++
		if calls == 1 {
			replyFile(t, w, req, http.StatusOK, "block.json")
		} else {
			replyFile(t, w, req, http.StatusOK, "error_unknown_account.json")
		}
	})
	var got []string
	c := newTestClient(t, []string{down.srv.URL + "/?apikey=secret", up.srv.URL}, WithObserver(func(o Observation) {
		if o.Took <= 0 {
			t.Errorf("observation %+v took nothing", o)
		}
		got = append(got, fmt.Sprintf("%s %s %s", o.Method, o.Endpoint, o.Outcome))
	}))
	if _, err := c.Block(context.Background(), FinalityFinal); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Block(context.Background(), FinalityFinal); err == nil {
		t.Fatal("want the node's error")
	}
	want := []string{
		"block " + down.srv.URL + "/ unknown", "block " + up.srv.URL + " ok",
		// The first endpoint cools down: tried last, after the answer.
		"block " + up.srv.URL + " error",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("observed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
