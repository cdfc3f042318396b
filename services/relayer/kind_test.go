package relayer

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/test/await"
)

const relayAccount = "relay.near"

// keyEnv is one key actor on the runtime over a fake chain.
type keyEnv struct {
	t     *testing.T
	h     *actortest.Harness
	clock *actortest.Clock
	chain *fakeChain
	cfg   Config
	pk    near.PublicKey
	id    string
}

func newKeyEnv(t *testing.T, cfg Config) *keyEnv {
	t.Helper()
	keys, err := ParseKeys([]byte(fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%q]}]}`, relayAccount, secretKey("k"))))
	if err != nil {
		t.Fatal(err)
	}
	pk := keys.PublicKeys(relayAccount)[0]
	chain := newFakeChain()
	chain.setNonce(pk, 7000)
	cfg.Keys, cfg.RPC = keys, chain
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock.Now}}, Kind(cfg))
	return &keyEnv{t: t, h: h, clock: clock, chain: chain, cfg: cfg.withDefaults(), pk: pk, id: ActorID(relayAccount, pk)}
}

func transfer(idem, receiver string) SubmitRequest {
	return SubmitRequest{IdempotencyKey: idem, ReceiverID: receiver, Actions: json.RawMessage(`[{"Transfer":{"deposit":"1"}}]`)}
}

func (e *keyEnv) submit(req SubmitRequest) (Submitted, error) {
	e.t.Helper()
	var s Submitted
	err := e.h.CallJSON(KindName, e.id, MethodSubmit, req, &s)
	return s, err
}

func (e *keyEnv) mustSubmit(req SubmitRequest) Submitted {
	e.t.Helper()
	s, err := e.submit(req)
	if err != nil {
		e.t.Fatalf("submit %s: %v", req.IdempotencyKey, err)
	}
	return s
}

func (e *keyEnv) get(idem string) (Intent, error) {
	e.t.Helper()
	var in Intent
	err := e.h.CallJSON(KindName, e.id, MethodGet, GetRequest{IdempotencyKey: idem}, &in)
	return in, err
}

func (e *keyEnv) status() KeyStatus {
	e.t.Helper()
	var s KeyStatus
	if err := e.h.CallJSON(KindName, e.id, MethodStatus, struct{}{}, &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// awaitStatus waits until the intent has the status, the poll firing meanwhile.
func (e *keyEnv) awaitStatus(idem, status string) Intent {
	e.t.Helper()
	var in Intent
	await.True(e.t, 10*time.Second, idem+" "+status, func() bool {
		e.poll()
		var err error
		in, err = e.get(idem)
		return err == nil && in.Status == status
	})
	return in
}

// poll fires the poll alarm: the clock moves past it and the scheduler looks.
func (e *keyEnv) poll() {
	e.clock.Advance(e.cfg.PollInterval)
	e.h.Wake(KindName, e.id)
}

func hashOf(t *testing.T, in Intent) near.Hash {
	t.Helper()
	if in.TxHash == nil {
		t.Fatalf("%s has no tx hash", in.IdempotencyKey)
	}
	h, err := near.ParseHash(*in.TxHash)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// An intent lands exactly once, with the nonce after the chain's, and a repeat returns the
// record; another body under the same key is a conflict.
func TestIntentLandsOnce(t *testing.T) {
	e := newKeyEnv(t, Config{})
	s := e.mustSubmit(transfer("pay:1", "bob.near"))
	if s.Existed || s.Intent.IdempotencyKey != "pay:1" || s.Intent.AccountID != relayAccount || s.Intent.PublicKey != e.pk.String() {
		t.Fatalf("submit reply %+v", s)
	}
	in := e.awaitStatus("pay:1", StatusSucceeded)
	if in.Nonce == nil || *in.Nonce != 7001 || in.Attempts != 1 || string(in.Outcome) != `{"SuccessValue":""}` {
		t.Fatalf("record %+v outcome %s", in, in.Outcome)
	}
	if sends := e.chain.sendsOf(hashOf(t, in)); len(sends) != 1 {
		t.Fatalf("%d sends of the transaction", len(sends))
	}
	again := e.mustSubmit(SubmitRequest{IdempotencyKey: "pay:1", ReceiverID: "bob.near",
		Actions: json.RawMessage(`[ {"Transfer": {"deposit": "1"}} ]`)})
	if !again.Existed || again.Intent.Status != StatusSucceeded || *again.Intent.TxHash != *in.TxHash {
		t.Fatalf("repeat %+v", again)
	}
	if _, err := e.submit(transfer("pay:1", "carol.near")); actortest.Code(err) != "idempotency_conflict" {
		t.Fatalf("another body: %v", err)
	}
	if e.chain.landedCount() != 1 {
		t.Fatalf("%d transactions landed", e.chain.landedCount())
	}
	st := e.status()
	if st.NextNonce == nil || *st.NextNonce != 7002 || st.Queued != 0 || st.InFlight != 0 {
		t.Fatalf("key status %+v", st)
	}
	if _, err := e.get("nope"); actortest.Code(err) != "unknown_intent" {
		t.Fatalf("get unknown: %v", err)
	}
	e.checkInvariants()
}

// A send whose answer is lost is resolved by asking for the hash and sending the identical
// bytes again, never by signing another transaction.
func TestLostAnswerResendsIdenticalBytes(t *testing.T) {
	e := newKeyEnv(t, Config{})
	first := true
	e.chain.fault = func(*near.SignedTransaction, near.Hash) sendFault {
		if first {
			first = false
			return dropLoseReply
		}
		return deliver
	}
	e.mustSubmit(transfer("pay:lost", "bob.near"))
	in := e.awaitStatus("pay:lost", StatusSucceeded)
	sends := e.chain.sendsOf(hashOf(t, in))
	if len(sends) != 2 || !bytes.Equal(sends[0], sends[1]) {
		t.Fatalf("%d sends, identical: %v", len(sends), len(sends) == 2 && bytes.Equal(sends[0], sends[1]))
	}
	if in.Attempts != 1 || *in.Nonce != 7001 || e.chain.landedCount() != 1 {
		t.Fatalf("record %+v, %d landed", in, e.chain.landedCount())
	}
	if st := e.status(); st.LastError == nil || st.LastError.Code != "outcome_unknown" {
		t.Fatalf("last error %+v", st.LastError)
	}
}

// A send that landed while its answer was lost is found by its hash: no second signature.
func TestLandedAnswerLostFoundByHash(t *testing.T) {
	e := newKeyEnv(t, Config{})
	e.chain.fault = func(*near.SignedTransaction, near.Hash) sendFault { return landLoseReply }
	e.mustSubmit(transfer("pay:x", "bob.near"))
	in := e.awaitStatus("pay:x", StatusSucceeded)
	// Its answer lost, the same bytes may be sent again at once (refused for their nonce, as it
	// landed): never another signature.
	if in.Attempts != 1 || e.chain.landedCount() != 1 {
		t.Fatalf("record %+v, %d landed", in, e.chain.landedCount())
	}
}

// Nonces increase in queue order, sends reach the node in nonce order, and no transaction of
// the key is refused for its nonce.
func TestNoncesIncreaseInOrder(t *testing.T) {
	e := newKeyEnv(t, Config{MaxInFlight: 8})
	const n = 40
	for i := range n {
		e.mustSubmit(transfer(fmt.Sprint("pay:", i), "bob.near"))
	}
	var last uint64
	for i := range n {
		in := e.awaitStatus(fmt.Sprint("pay:", i), StatusSucceeded)
		if *in.Nonce <= last || in.Attempts != 1 {
			t.Fatalf("pay:%d has nonce %d after %d (attempts %d)", i, *in.Nonce, last, in.Attempts)
		}
		last = *in.Nonce
	}
	e.chain.mu.Lock()
	defer e.chain.mu.Unlock()
	for i := 1; i < len(e.chain.arrived); i++ {
		if e.chain.arrived[i] <= e.chain.arrived[i-1] {
			t.Fatalf("sends arrived in the order %v", e.chain.arrived)
		}
	}
	if e.chain.invalid != 0 {
		t.Fatalf("%d InvalidNonce refusals", e.chain.invalid)
	}
}

// Up to MaxInFlight transactions are signed before any answer, the rest wait in the queue;
// their sends go one answer apart, in nonce order.
func TestPipelining(t *testing.T) {
	e := newKeyEnv(t, Config{MaxInFlight: 4})
	e.chain.gate = make(chan struct{})
	for i := range 10 {
		e.mustSubmit(transfer(fmt.Sprint("pay:", i), "bob.near"))
	}
	await.True(t, 10*time.Second, "the first send held", func() bool { return e.chain.held() == 1 })
	if st := e.status(); st.InFlight != 4 || st.Queued != 6 {
		t.Fatalf("key status %+v", st)
	}
	e.checkInvariants()
	close(e.chain.gate)
	for i := range 10 {
		e.awaitStatus(fmt.Sprint("pay:", i), StatusSucceeded)
	}
}

// A failover while sends are under way: the new activation re-sends the identical bytes and
// signs nothing again.
func TestFailoverResendsIdenticalBytes(t *testing.T) {
	e := newKeyEnv(t, Config{MaxInFlight: 4})
	e.chain.gate = make(chan struct{})
	for i := range 3 {
		e.mustSubmit(transfer(fmt.Sprint("pay:", i), "bob.near"))
	}
	await.True(t, 10*time.Second, "the first send held", func() bool { return e.chain.held() == 1 })
	var before []Intent
	for i := range 3 {
		in, err := e.get(fmt.Sprint("pay:", i))
		if err != nil || in.Status != StatusSubmitted {
			t.Fatalf("pay:%d: %+v %v", i, in, err)
		}
		before = append(before, in)
	}
	e.h.Failover() // cancels the held sends: their answers are gone with the activation
	await.True(t, 10*time.Second, "held sends cancelled", func() bool { return e.chain.held() == 0 })
	e.chain.mu.Lock()
	e.chain.gate = nil
	e.chain.mu.Unlock()
	e.poll() // the poll alarm wakes the actor on the new leader
	for i, b := range before {
		in := e.awaitStatus(b.IdempotencyKey, StatusSucceeded)
		if *in.TxHash != *b.TxHash || *in.Nonce != *b.Nonce || in.Attempts != 1 {
			t.Fatalf("pay:%d was signed again: %+v, before %+v", i, in, b)
		}
		sends := e.chain.sendsOf(hashOf(t, in))
		if i == 0 && len(sends) < 2 { // the one that reached the node before the failover
			t.Fatalf("pay:%d: %d sends, want the re-send", i, len(sends))
		}
		for _, s := range sends[1:] {
			if !bytes.Equal(s, sends[0]) {
				t.Fatalf("pay:%d: re-sent bytes differ", i)
			}
		}
	}
	if e.chain.landedCount() != 3 {
		t.Fatalf("%d landed", e.chain.landedCount())
	}
	e.checkInvariants()
}

// A foreign use of the key makes the next transaction InvalidNonce: the key learns the chain's
// nonce and the intent is signed again with a nonce above it.
func TestForeignNonceBumpRecovers(t *testing.T) {
	e := newKeyEnv(t, Config{})
	e.mustSubmit(transfer("pay:a", "bob.near"))
	e.awaitStatus("pay:a", StatusSucceeded)
	e.chain.setNonce(e.pk, 7050) // someone else used the key
	e.mustSubmit(transfer("pay:b", "bob.near"))
	in := e.awaitStatus("pay:b", StatusSucceeded)
	if *in.Nonce != 7051 || in.Attempts != 2 {
		t.Fatalf("record %+v", in)
	}
	e.mustSubmit(transfer("pay:c", "bob.near"))
	if in := e.awaitStatus("pay:c", StatusSucceeded); *in.Nonce != 7052 || in.Attempts != 1 {
		t.Fatalf("next record %+v", in)
	}
	e.checkInvariants()
}

// A refusal for another reason than nonce or block hash rejects the intent with NEAR's
// error name; the key goes on.
func TestRejected(t *testing.T) {
	e := newKeyEnv(t, Config{})
	e.chain.refusal["poor.near"] = &near.NotEnoughBalanceError{SignerID: relayAccount}
	e.mustSubmit(transfer("pay:poor", "poor.near"))
	in := e.awaitStatus("pay:poor", StatusRejected)
	if in.Error == nil || in.Error.Code != "NotEnoughBalance" || (in.Outcome != nil && string(in.Outcome) != "null") {
		t.Fatalf("record %+v", in)
	}
	e.mustSubmit(transfer("pay:ok", "bob.near"))
	e.awaitStatus("pay:ok", StatusSucceeded)
	e.checkInvariants()
	if e.chain.landedCount() != 1 {
		t.Fatalf("%d landed", e.chain.landedCount())
	}
}

// A transaction the node never keeps is re-sent while its block hash is valid, and signed
// again once the hash is past the validity window.
func TestExpiredTransactionReplaced(t *testing.T) {
	e := newKeyEnv(t, Config{ValidityBlocks: 100})
	var dead near.Hash
	e.chain.fault = func(_ *near.SignedTransaction, h near.Hash) sendFault {
		if dead == (near.Hash{}) {
			dead = h
		}
		if h == dead {
			return dropLoseReply
		}
		return deliver
	}
	e.mustSubmit(transfer("pay:d", "bob.near"))
	await.True(t, 10*time.Second, "the re-send", func() bool {
		e.poll()
		e.chain.mu.Lock()
		defer e.chain.mu.Unlock()
		return len(e.chain.sends[dead]) >= 2
	})
	e.chain.advance(150)
	e.poll()
	in := e.awaitStatus("pay:d", StatusSucceeded)
	if *in.TxHash == dead.String() || in.Attempts != 2 || *in.Nonce != 7002 {
		t.Fatalf("record %+v", in)
	}
	for _, s := range e.chain.sendsOf(dead)[1:] {
		if !bytes.Equal(s, e.chain.sendsOf(dead)[0]) {
			t.Fatal("the dead transaction's re-sends differ")
		}
	}
	e.checkInvariants()
}

// Terminal records are removed after the retention.
func TestRetention(t *testing.T) {
	e := newKeyEnv(t, Config{Retention: time.Hour})
	e.mustSubmit(transfer("pay:r", "bob.near"))
	e.awaitStatus("pay:r", StatusSucceeded)
	e.clock.Advance(time.Hour + time.Second)
	e.h.Wake(KindName, e.id)
	await.True(t, 10*time.Second, "the record removed", func() bool {
		_, ok := e.h.State(KindName, e.id).Get("i/pay:r")
		return !ok
	})
	if _, err := e.get("pay:r"); actortest.Code(err) != "unknown_intent" {
		t.Fatalf("get after retention: %v", err)
	}
	s := e.h.State(KindName, e.id)
	for _, kv := range s.Data {
		if string(kv.Key) != "m" {
			t.Errorf("key %q left", kv.Key)
		}
	}
	if len(s.Alarms) != 0 {
		t.Errorf("alarms left: %v", s.Alarms)
	}
}

// Malformed submissions are refused with the contract's codes.
func TestSubmitValidation(t *testing.T) {
	e := newKeyEnv(t, Config{})
	for name, c := range map[string]struct {
		req  SubmitRequest
		code string
	}{
		"bad idem":       {transfer("has space", "bob.near"), "invalid_id"},
		"no actions":     {SubmitRequest{IdempotencyKey: "x", ReceiverID: "bob.near", Actions: json.RawMessage(`[]`)}, "invalid_request"},
		"unsupported":    {SubmitRequest{IdempotencyKey: "x", ReceiverID: "bob.near", Actions: json.RawMessage(`[{"Stake":{"stake":"1","public_key":"ed25519:x"}}]`)}, "unsupported_action"},
		"bad receiver":   {transfer("x", "Bob"), "invalid_request"},
		"bad delegate":   {SubmitRequest{SignedDelegate: "AAAA"}, "invalid_delegate"},
		"both forms":     {SubmitRequest{IdempotencyKey: "x", ReceiverID: "bob.near", SignedDelegate: "AAAA"}, "invalid_request"},
		"not base64 del": {SubmitRequest{SignedDelegate: "!!"}, "invalid_delegate"},
	} {
		if _, err := e.submit(c.req); actortest.Code(err) != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
	}
	if st := e.status(); st.Queued != 0 {
		t.Fatalf("refused submissions queued: %+v", st)
	}
}

// A signed delegate is wrapped in a transaction to its sender; without an idempotency key it
// is named by its NEP-461 hash, and an expired one is refused.
func TestSignedDelegate(t *testing.T) {
	e := newKeyEnv(t, Config{})
	alice := near.NewKeyPairFromSeed(make([]byte, 32))
	delegate := func(maxBlock uint64) (string, near.Hash) {
		sda, h, err := near.SignDelegateAction(near.DelegateAction{SenderID: "alice.near", ReceiverID: "app.near",
			Actions: []near.Action{near.Transfer{Deposit: near.U128From64(1)}}, Nonce: 1, MaxBlockHeight: maxBlock,
			PublicKey: alice.PublicKey()}, alice)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := sda.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(raw), h
	}
	body, h := delegate(5000)
	s := e.mustSubmit(SubmitRequest{SignedDelegate: body})
	idem := "delegate:" + base58.Encode(h[:])
	if s.Intent.IdempotencyKey != idem {
		t.Fatalf("idempotency key %s, want %s", s.Intent.IdempotencyKey, idem)
	}
	in := e.awaitStatus(idem, StatusSucceeded)
	stx, err := near.DecodeSignedTransaction(e.chain.sendsOf(hashOf(t, in))[0])
	if err != nil {
		t.Fatal(err)
	}
	if tx := stx.Transaction; tx.ReceiverID != "alice.near" || tx.SignerID != relayAccount || len(tx.Actions) != 1 || tx.Actions[0].Kind() != near.KindDelegate {
		t.Fatalf("transaction to %s by %s with %v", tx.ReceiverID, tx.SignerID, tx.Actions)
	}
	old, _ := delegate(10) // the chain is at 1000
	if _, err := e.submit(SubmitRequest{SignedDelegate: old}); actortest.Code(err) != "invalid_delegate" {
		t.Fatalf("expired delegate: %v", err)
	}
}

// checkInvariants checks the committed storage of the key actor against the invariants of
// kind.go: every record in exactly the index its status says, at its seq, nonce or remove_at;
// the queue count; next_nonce above every nonce used; the poll alarm while work is left.
func (e *keyEnv) checkInvariants() {
	e.t.Helper()
	s := e.h.State(KindName, e.id)
	records := map[string]record{}
	queue, flight, kept := map[string]uint64{}, map[string]uint64{}, map[string]int64{}
	var m meta
	queued, flights, landed := 0, 0, 0
	for _, kv := range s.Data {
		k := string(kv.Key)
		switch {
		case k == "m":
			if err := json.Unmarshal(kv.Value, &m); err != nil {
				e.t.Fatal(err)
			}
		case k == "c/queued":
			queued = int(binary.BigEndian.Uint64(kv.Value))
		case k == "c/flights":
			flights = int(binary.BigEndian.Uint64(kv.Value))
		case k == "c/landed":
			landed = int(binary.BigEndian.Uint64(kv.Value))
		case strings.HasPrefix(k, "i/"):
			var r record
			if err := json.Unmarshal(kv.Value, &r); err != nil {
				e.t.Fatal(err)
			}
			records[k[2:]] = r
		case strings.HasPrefix(k, "q/"):
			queue[string(kv.Value)] = binary.BigEndian.Uint64(kv.Key[2:])
		case strings.HasPrefix(k, "f/"):
			flight[string(kv.Value)] = binary.BigEndian.Uint64(kv.Key[2:])
		case strings.HasPrefix(k, "r/"):
			t, idem, err := retention.Parse(kv.Key)
			if err != nil {
				e.t.Fatal(err)
			}
			kept[idem] = t
		default:
			e.t.Fatalf("unexpected key %q", k)
		}
	}
	if queued != len(queue) {
		e.t.Fatalf("c/queued %d, %d q/ entries", queued, len(queue))
	}
	if flights != len(flight) {
		e.t.Fatalf("c/flights %d, %d f/ entries", flights, len(flight))
	}
	marked := 0
	for _, r := range records {
		if r.Landed {
			marked++
			if r.Status != StatusSubmitted {
				e.t.Fatalf("%s %s still marked landed", r.Status, r.IdempotencyKey)
			}
		}
	}
	if landed != marked {
		e.t.Fatalf("c/landed %d, %d records marked landed", landed, marked)
	}
	for idem, r := range records {
		seq, inQ := queue[idem]
		n, inF := flight[idem]
		at, inR := kept[idem]
		switch r.Status {
		case StatusQueued:
			if !inQ || inF || inR || seq != r.Seq {
				e.t.Fatalf("queued %s: q %v (seq %d of %d) f %v r %v", idem, inQ, seq, r.Seq, inF, inR)
			}
		case StatusSubmitted:
			if inQ || !inF || inR || n != *r.Nonce || len(r.Signed) == 0 || r.TxHash == nil {
				e.t.Fatalf("submitted %s: q %v f %v (nonce %d) r %v", idem, inQ, inF, n, inR)
			}
			if m.NextNonce != nil && *m.NextNonce <= n {
				e.t.Fatalf("next_nonce %d not above in-flight nonce %d", *m.NextNonce, n)
			}
		default:
			if inQ || inF || !inR || at != r.RemoveAt {
				e.t.Fatalf("%s %s: q %v f %v r %v", r.Status, idem, inQ, inF, inR)
			}
		}
	}
	if len(queue)+len(flight) > 0 {
		if _, ok := s.Alarms["poll"]; !ok {
			e.t.Fatal("work left without the poll alarm")
		}
	}
	if len(kept) > 0 {
		if _, ok := s.Alarms["retention"]; !ok {
			e.t.Fatal("terminal records without the retention alarm")
		}
	}
	if len(flight) != len(records)-len(queue)-len(kept) {
		e.t.Fatalf("%d records, %d queued, %d in flight, %d kept", len(records), len(queue), len(flight), len(kept))
	}
}

// Transactions the node dropped are re-sent together at the next poll, in nonce order, so
// that none of them is refused for its nonce and none is signed again.
func TestDroppedResentInNonceOrder(t *testing.T) {
	e := newKeyEnv(t, Config{MaxInFlight: 8})
	seen := map[near.Hash]bool{}
	e.chain.fault = func(_ *near.SignedTransaction, h near.Hash) sendFault {
		if !seen[h] {
			seen[h] = true
			return dropLoseReply
		}
		return deliver
	}
	for i := range 8 {
		e.mustSubmit(transfer(fmt.Sprint("pay:", i), "bob.near"))
	}
	for i := range 8 {
		if in := e.awaitStatus(fmt.Sprint("pay:", i), StatusSucceeded); in.Attempts != 1 {
			t.Fatalf("pay:%d signed %d times", i, in.Attempts)
		}
	}
	e.chain.mu.Lock()
	defer e.chain.mu.Unlock()
	if e.chain.invalid != 0 {
		t.Fatalf("%d InvalidNonce refusals; arrivals %v", e.chain.invalid, e.chain.arrived)
	}
}
