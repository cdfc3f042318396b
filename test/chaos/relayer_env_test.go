package chaos

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/services/relayer"
	"github.com/shardkeeper/shardkeeper/test/fakenear"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// The relayer under chaos: a fake NEAR node in this process (on 127.0.0.1, which the nodes
// reach from their own loopback addresses; the network faults cut node-to-node links only),
// an account whose access keys the cluster's relayer signs with, and a receiver of its
// transfers.
const (
	relayAccount  = "relay.near"
	relayReceiver = "payee.near"
	relayToken    = "chaos-relayer-token-0123456789abcdef"
)

// relayerEnv is the fake NEAR of one cluster and the node flags that point its relayer there.
type relayerEnv struct {
	fake  *fakenear.Fake
	keys  []near.PublicKey // the account's keys, in the keys file's order
	flags []string

	mu    sync.Mutex
	bumps map[string]bumpRecord // public key → the foreign sender's transaction
}

// bumpRecord is a foreign sender's transaction on one of the relayer's keys.
type bumpRecord struct {
	hash  string
	nonce uint64
}

// relayerSecret derives key i of a seed: its secret in the keys file's syntax
// (ed25519:<base58 of the 64-byte private key>) and its public key.
func relayerSecret(seed uint64, i int) (string, near.PublicKey) {
	s := sha256.Sum256(fmt.Appendf(nil, "chaos relayer key %d/%d", seed, i))
	sk := ed25519.NewKeyFromSeed(s[:])
	var pk near.PublicKey
	copy(pk[:], sk.Public().(ed25519.PublicKey))
	return "ed25519:" + base58.Encode(sk), pk
}

// startRelayerEnv starts the fake NEAR (faults set from the start, its randomness from seed)
// with relayAccount holding nkeys keys and relayReceiver, and writes the keys and token
// files (mode 0600) into a temporary directory.
func startRelayerEnv(t *testing.T, seed uint64, nkeys int, blockInterval time.Duration, faults fakenear.Faults) *relayerEnv {
	t.Helper()
	e := &relayerEnv{bumps: map[string]bumpRecord{}}
	var secrets []string
	var keys []fakenear.AccountKey
	for i := range nkeys {
		s, pk := relayerSecret(seed, i)
		secrets = append(secrets, strconv.Quote(s))
		e.keys = append(e.keys, pk)
		keys = append(keys, fakenear.AccountKey{PublicKey: pk})
	}
	rich, _ := near.ParseU128("1000000000000000000000000000000")
	e.fake = fakenear.Start(t, fakenear.Config{BlockInterval: blockInterval, Seed: seed, Accounts: []fakenear.Account{
		{ID: relayAccount, Balance: rich, Keys: keys},
		{ID: relayReceiver, Balance: near.U128From64(0)},
	}})
	if err := e.fake.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	keysFile := write("relayer-keys.json", fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%s]}]}`, relayAccount, strings.Join(secrets, ",")))
	tokenFile := write("relayer-token", relayToken+"\n")
	var urls []string
	for _, ep := range e.fake.Endpoints() {
		urls = append(urls, ep.URL())
	}
	e.flags = []string{"--relayer-keys", keysFile, "--relayer-token-file", tokenFile, "--near-rpc", strings.Join(urls, ",")}
	return e
}

// keyOf is the key an idempotency key is assigned to (every node computes the same).
func (e *relayerEnv) keyOf(idem string) near.PublicKey {
	pk, _ := relayer.Assign(idem, e.keys)
	return pk
}

// partitionOf is the partition of a key's actor.
func partitionOf(pk near.PublicKey) uint32 {
	return actors.PartitionOf(relayer.KindName, relayer.ActorID(relayAccount, pk), partitions)
}

// bump has a foreign sender of pk land a transaction with nonce ahead (+1000) of the key's
// current nonce on chain, as another holder of the key would.
func (e *relayerEnv) bump(pk near.PublicKey) (bumpRecord, error) {
	cur, _ := e.fake.AccessKeyNonce(relayAccount, pk)
	h, err := e.fake.BumpNonce(relayAccount, pk, cur+1000)
	if err != nil {
		return bumpRecord{}, fmt.Errorf("bump the nonce of %s: %w", pk, err)
	}
	b := bumpRecord{hash: h.String(), nonce: cur + 1000}
	e.mu.Lock()
	e.bumps[pk.String()] = b
	e.mu.Unlock()
	return b, nil
}

// transferBody is the body of intent idem: a transfer of deposit yoctoNEAR to relayReceiver.
func transferBody(idem string, deposit uint64) []byte {
	return fmt.Appendf(nil, `{"idempotency_key":%q,"receiver_id":%q,"actions":[{"Transfer":{"deposit":"%d"}}]}`, idem, relayReceiver, deposit)
}

// relayerAnswer is one HTTP attempt of the relayer API.
type relayerAnswer struct {
	sent       bool // false: the connection could not be made (no effect)
	status     int  // 0: no answer (transport error)
	code       string
	retryAfter time.Duration
	intent     relayer.Intent
	err        error
}

// output is the answer as a history Output: a 5xx or no answer is an unknown outcome.
func (a relayerAnswer) output() Output {
	switch {
	case a.status == 0:
		msg := "no answer"
		if a.err != nil {
			msg = a.err.Error()
			switch {
			case errors.Is(a.err, context.DeadlineExceeded), strings.Contains(msg, "Client.Timeout"):
				msg = "timeout"
			case strings.HasSuffix(msg, "EOF"):
				msg = "EOF"
			case strings.Contains(msg, "connection reset"):
				msg = "connection reset"
			}
		}
		return Output{Unknown: true, Err: msg}
	case a.status >= 500:
		return Output{Unknown: true, Status: a.status, Code: a.code}
	case a.status == 200 || a.status == 201:
		o := Output{Status: a.status, Intent: a.intent.Status}
		if a.intent.TxHash != nil {
			o.TxHash = *a.intent.TxHash
		}
		return o
	}
	return Output{Status: a.status, Code: a.code}
}

// definite: an answer that is not a 5xx, a 429 or missing.
func (a relayerAnswer) definite() bool {
	return a.sent && a.status != 0 && a.status < 500 && a.status != http.StatusTooManyRequests
}

// relayerClient sends the relayer API's requests, one attempt each.
type relayerClient struct {
	hc *http.Client
}

func newRelayerClient(t *testing.T) *relayerClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &relayerClient{hc: &http.Client{Transport: tr}}
}

func (rc *relayerClient) do(ctx context.Context, n *proc.Node, method, path string, body []byte) relayerAnswer {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.URL(path), rd)
	if err != nil {
		return relayerAnswer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+relayToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := rc.hc.Do(req)
	if err != nil {
		if isDialError(err) {
			return relayerAnswer{err: err}
		}
		return relayerAnswer{sent: true, err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return relayerAnswer{sent: true, err: err}
	}
	a := relayerAnswer{sent: true, status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		a.retryAfter = time.Duration(s) * time.Second
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(b, &a.intent); err != nil {
			a.status, a.err = 0, fmt.Errorf("decode the intent %q: %w", b, err)
		}
		return a
	}
	var e struct {
		Code string `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	a.code = e.Code
	a.err = fmt.Errorf("%s %s via %s: %d %s", method, path, n.Config.NodeID, resp.StatusCode, strings.TrimSpace(string(b)))
	return a
}

func intentsPath() string { return "/v1/relayers/" + relayAccount + "/intents" }

// submit POSTs an intent once.
func (rc *relayerClient) submit(n *proc.Node, idem string, body []byte) relayerAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	return rc.do(ctx, n, http.MethodPost, intentsPath(), body)
}

// read GETs an intent once, long-polling up to wait for it to be terminal.
func (rc *relayerClient) read(n *proc.Node, idem string, wait time.Duration) relayerAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), wait+attemptTimeout)
	defer cancel()
	path := intentsPath() + "/" + idem
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	return rc.do(ctx, n, http.MethodGet, path, nil)
}

// ledgerReport is what the fake's ledger says of a set of intents.
type ledgerReport struct {
	landed        int // transactions of the account's keys (not foreign) that landed
	resends       int // refused entries for hashes that landed (identical bytes sent again)
	replaced      int // intents signed more than once
	lost          int // transactions of the relayer the node lost (the lose fault)
	ownInvalid    []string
	byKeyLanded   map[string]int
	foreignLanded int
}

// intentView is what the clients learnt of one intent: its final record and every tx hash
// any answer showed.
type intentView struct {
	final  relayer.Intent
	hashes map[string]bool
}

// checkLedger checks the fake's ledger against the intents (idempotency key → view; every
// one terminal): each landed transaction of the account's keys is the final transaction of
// exactly one intent, and each intent that is not rejected has exactly one landed
// transaction, its final one (a rejected one none); no hash an answer showed for an intent
// other than its final one ever landed; per key, landed nonces strictly increase in ledger
// order; no transaction of the relayer was refused or dropped for its nonce (InvalidNonce)
// unless a foreign sender's transaction on that key explains it (it landed before, with a
// nonce at least as large) or the node lost it before (the lose fault: a later nonce then
// lands first); and no transaction an answer showed and that did not land was replaced
// unless the same explains it. Violations are test errors.
func (e *relayerEnv) checkLedger(t *testing.T, intents map[string]*intentView) ledgerReport {
	t.Helper()
	ledger := e.fake.Ledger()
	rep := ledgerReport{byKeyLanded: map[string]int{}}
	finalOf := map[string]string{} // final tx hash → idempotency key
	for idem, v := range intents {
		if v.final.TxHash == nil {
			if v.final.Status != intentRejected {
				t.Errorf("intent %s is %s without a tx hash", idem, v.final.Status)
			}
			continue
		}
		finalOf[*v.final.TxHash] = idem
		if v.final.Attempts > 1 {
			rep.replaced++
		}
	}
	landedHash := map[string]bool{}
	landings := map[string]int{} // idempotency key → landed transactions
	lastNonce := map[string]uint64{}
	foreignAt := map[string]LedgerSeqNonce{} // public key → the last foreign landing so far
	invalidSeen := map[string]bool{}
	own := func(l fakenear.LedgerEntry) bool { return l.Signer == relayAccount && !l.Foreign }
	lostHash := map[string]bool{}
	explained := map[string]bool{} // hashes whose replacement a foreign sender or a loss explains
	for _, l := range ledger {
		switch {
		case l.Kind == fakenear.Landed:
			landedHash[l.Hash] = true
		case l.Kind == fakenear.Lost && own(l):
			if !lostHash[l.Hash] {
				rep.lost++
			}
			lostHash[l.Hash] = true
			explained[l.Hash] = true
		}
	}
	for _, l := range ledger {
		if l.Signer != relayAccount {
			continue
		}
		switch l.Kind {
		case fakenear.Landed:
			if last, ok := lastNonce[l.PublicKey]; ok && l.Nonce <= last {
				t.Errorf("key %s: transaction %s landed with nonce %d after nonce %d", l.PublicKey, l.Hash, l.Nonce, last)
			}
			lastNonce[l.PublicKey] = l.Nonce
			if l.Foreign {
				rep.foreignLanded++
				foreignAt[l.PublicKey] = LedgerSeqNonce{seq: l.Seq, nonce: l.Nonce}
				continue
			}
			rep.landed++
			rep.byKeyLanded[l.PublicKey]++
			idem, ok := finalOf[l.Hash]
			if !ok {
				t.Errorf("transaction %s (key %s, nonce %d) landed but is no intent's final transaction", l.Hash, l.PublicKey, l.Nonce)
				continue
			}
			landings[idem]++
		case fakenear.Refused, fakenear.Dropped:
			if !own(l) {
				continue
			}
			if landedHash[l.Hash] {
				if l.Kind == fakenear.Refused {
					rep.resends++
				}
				continue
			}
			if l.ReasonName != "InvalidNonce" {
				continue
			}
			if f, ok := foreignAt[l.PublicKey]; ok && l.Nonce <= f.nonce {
				explained[l.Hash] = true
				continue // a foreign sender took the nonce
			}
			if lostHash[l.Hash] {
				continue // the node lost it, and a later nonce landed meanwhile
			}
			if invalidSeen[l.Hash] {
				continue
			}
			invalidSeen[l.Hash] = true
			rep.ownInvalid = append(rep.ownInvalid, fmt.Sprintf("%s %s (key %s, nonce %d, seq %d, endpoint %s)",
				l.Kind, l.Hash, l.PublicKey, l.Nonce, l.Seq, l.Endpoint))
		}
	}
	for idem, v := range intents {
		want := 1
		if v.final.Status == intentRejected {
			want = 0
		}
		if landings[idem] != want {
			t.Errorf("intent %s (%s, tx %v): %d landed transactions, want %d", idem, v.final.Status, deref(v.final.TxHash), landings[idem], want)
		}
		for h := range v.hashes {
			if v.final.TxHash != nil && h == *v.final.TxHash {
				continue
			}
			if landedHash[h] {
				t.Errorf("intent %s: tx %s, which an answer showed before the final %s, landed", idem, h, deref(v.final.TxHash))
			} else if !explained[h] {
				t.Errorf("intent %s: tx %s, which an answer showed, was replaced by %s with no foreign sender or loss to explain it", idem, h, deref(v.final.TxHash))
			}
		}
	}
	if len(rep.ownInvalid) > 0 {
		if b, err := json.MarshalIndent(ledger, "", " "); err == nil {
			path := filepath.Join(outDir(t), "ledger.json")
			if err := os.WriteFile(path, b, 0o644); err == nil {
				t.Logf("the fake NEAR's ledger: %s", path)
			}
		}
		t.Errorf("%d transactions of the relayer refused or dropped for their nonce with no foreign sender to explain it:\n  %s",
			len(rep.ownInvalid), strings.Join(rep.ownInvalid[:min(len(rep.ownInvalid), 20)], "\n  "))
	}
	return rep
}

// LedgerSeqNonce is a place in the ledger and the nonce of the transaction there.
type LedgerSeqNonce struct {
	seq   uint64
	nonce uint64
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// leaderOf returns the node leading partition p as a running node sees it ("" if none).
func (c *cluster) leaderOf(p uint32) string {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		var v clusterView
		if err := c.getJSON(n, "/v1/cluster", &v); err != nil {
			continue
		}
		for _, pv := range v.Partitions {
			if pv.ID == p && pv.Leader != "" {
				return pv.Leader
			}
		}
	}
	return ""
}

// nodeIndex returns the index of node id.
func (c *cluster) nodeIndex(id string) int {
	return slices.IndexFunc(c.nodes, func(n *proc.Node) bool { return n.Config.NodeID == id })
}

// histogram renders counts of small integers as "k×n" pairs in order.
func histogram(values []int) string {
	counts := map[int]int{}
	for _, v := range values {
		counts[v]++
	}
	keys := make([]int, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d: %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// relayerHistory is the clients' side of the relayer: it sends intents and reads through the
// cluster's nodes, records every attempt sent (history of RelayerModel), and keeps what the
// answers showed of each intent.
type relayerHistory struct {
	c   *cluster
	env *relayerEnv
	rc  *relayerClient
	rec *Recorder
	ids ClientIDs

	mu         sync.Mutex
	bodies     map[string][]byte // every intent sent at least once
	order      []string          // their idempotency keys, in the order first sent
	views      map[string]*intentView
	posts      map[string]int // POST attempts sent per intent
	stats      map[string]int // "op outcome" → count
	unexpected []string
	acked      int // definite answers to POSTs
}

func newRelayerHistory(c *cluster, env *relayerEnv) *relayerHistory {
	return &relayerHistory{c: c, env: env, rc: newRelayerClient(c.t), rec: NewRecorder(c.start),
		bodies: map[string][]byte{}, views: map[string]*intentView{}, posts: map[string]int{}, stats: map[string]int{}}
}

// relayerClientState is one client goroutine of the relayer: its porcupine id (renewed after
// an unknown outcome), its place in the round robin and its randomness.
type relayerClientState struct {
	id   int
	next int
	rnd  *rand.Rand
}

func (h *relayerHistory) node(cs *relayerClientState) *proc.Node {
	n := h.c.nodes[cs.next%len(h.c.nodes)]
	cs.next++
	return n
}

// record adds a sent attempt to the history and takes what it showed of the intent.
func (h *relayerHistory) record(cs *relayerClientState, op, idem string, node *proc.Node, call, ret int64, a relayerAnswer) {
	out := a.output()
	h.mu.Lock()
	defer h.mu.Unlock()
	outcome := out.String()
	if !a.sent {
		outcome = "not sent"
	}
	h.stats[op+" "+outcome]++
	if !a.sent {
		return
	}
	if op == OpSubmit {
		h.posts[idem]++
	}
	bad := a.status >= 500 && a.status != http.StatusServiceUnavailable ||
		a.status >= 400 && a.status < 500 && a.status != http.StatusTooManyRequests && !(op == OpRead && a.code == "unknown_intent")
	if bad && len(h.unexpected) < 50 {
		h.unexpected = append(h.unexpected, fmt.Sprintf("%s %s: %v", op, idem, a.err))
	}
	h.rec.Add(cs.id, Input{Op: op, Key: idem, Node: node.Config.NodeID}, call, ret, out)
	if out.Unknown {
		cs.id = h.ids.New() // that operation stays open
	}
	if a.status == http.StatusOK || a.status == http.StatusCreated {
		v := h.views[idem]
		if v == nil {
			v = &intentView{hashes: map[string]bool{}}
			h.views[idem] = v
		}
		if a.intent.TxHash != nil {
			v.hashes[*a.intent.TxHash] = true
		}
		if intentTerminal(a.intent.Status) {
			v.final = a.intent
		}
		if op == OpSubmit {
			h.acked++
		}
	}
}

// submit POSTs body until a definite answer, through the nodes in turn: a 503 or 429 is
// retried after its Retry-After (at most 1 s) plus jitter, an answer lost on the connection
// after a short pause (the body is the same, so a repeat is safe), a refused connection at
// once on the next node. It gives up after deadline or once stop says so, and reports
// whether the answer was definite.
func (h *relayerHistory) submit(cs *relayerClientState, idem string, body []byte, deadline time.Time, stop func() bool) (relayerAnswer, bool) {
	h.mu.Lock()
	if _, ok := h.bodies[idem]; !ok {
		h.bodies[idem] = body
		h.order = append(h.order, idem)
	}
	h.mu.Unlock()
	for {
		n := h.node(cs)
		call := h.rec.Now()
		a := h.rc.submit(n, idem, body)
		h.record(cs, OpSubmit, idem, n, call, h.rec.Now(), a)
		if a.definite() {
			return a, true
		}
		if time.Now().After(deadline) || stop() {
			return a, false
		}
		wait := time.Duration(20+cs.rnd.IntN(50)) * time.Millisecond
		switch {
		case !a.sent:
			wait = 5 * time.Millisecond
		case a.status != 0:
			wait += min(a.retryAfter, time.Second)
		}
		time.Sleep(wait)
	}
}

// read GETs an intent once (long-polling up to wait) and records the attempt.
func (h *relayerHistory) read(cs *relayerClientState, idem string, wait time.Duration) relayerAnswer {
	n := h.node(cs)
	call := h.rec.Now()
	a := h.rc.read(n, idem, wait)
	h.record(cs, OpRead, idem, n, call, h.rec.Now(), a)
	return a
}

// settle drives every intent sent to a terminal status, as a client that lost answers does:
// it submits the same body again until a definite answer (the intent then exists), then
// long-polls it until terminal. Workers run concurrently; each failure is a test error.
func (h *relayerHistory) settle(workers int, timeout time.Duration) {
	t := h.c.t
	deadline := time.Now().Add(timeout)
	h.mu.Lock()
	idems := slices.Clone(h.order)
	h.mu.Unlock()
	jobs := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for w := range workers {
		cs := &relayerClientState{id: h.ids.New(), next: w, rnd: rand.New(rand.NewPCG(uint64(w), 77))}
		wg.Go(func() {
			for idem := range jobs {
				h.mu.Lock()
				body := h.bodies[idem]
				h.mu.Unlock()
				a, ok := h.submit(cs, idem, body, deadline, func() bool { return false })
				for ok && !intentTerminal(a.intent.Status) && time.Now().Before(deadline) {
					if a = h.read(cs, idem, 10*time.Second); !a.definite() {
						time.Sleep(50 * time.Millisecond)
					}
				}
				if !ok || !intentTerminal(a.intent.Status) {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%s: %s %s (%v)", idem, a.output(), a.intent.Status, a.err))
					mu.Unlock()
				}
			}
		})
	}
	for _, idem := range idems {
		jobs <- idem
	}
	close(jobs)
	wg.Wait()
	if len(failed) > 0 {
		slices.Sort(failed)
		t.Errorf("%d intents not terminal within %s: %s", len(failed), timeout, strings.Join(failed[:min(len(failed), 10)], "; "))
	}
}

// intents returns the view of every intent sent.
func (h *relayerHistory) intents() map[string]*intentView {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]*intentView{}
	for _, idem := range h.order {
		v := h.views[idem]
		if v == nil {
			v = &intentView{hashes: map[string]bool{}}
		}
		out[idem] = v
	}
	return out
}

// checkHistory checks the recorded history against RelayerModel, and flags the answers no
// model allows (a 409 for the same body, a 400, a 5xx other than 503).
func (h *relayerHistory) checkHistory(name string) {
	t := h.c.t
	h.mu.Lock()
	for _, u := range h.unexpected {
		t.Errorf("relayer: unexpected answer: %s", u)
	}
	h.mu.Unlock()
	h.c.checkHistory(name, RelayerModel, h.rec.Ops())
}

// statsLine summarizes the outcomes of the relayer requests sent.
func (h *relayerHistory) statsLine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := slices.Sorted(maps.Keys(h.stats))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, h.stats[k]))
	}
	return strings.Join(parts, "; ")
}

// checkReceiver checks that the receiver got exactly the deposits of the succeeded intents.
func (h *relayerHistory) checkReceiver(deposit uint64) {
	t := h.c.t
	succeeded := 0
	for _, v := range h.intents() {
		if v.final.Status == intentSucceeded {
			succeeded++
		}
	}
	got, _ := h.env.fake.Balance(relayReceiver)
	if want := fmt.Sprint(uint64(succeeded) * deposit); got.String() != want {
		t.Errorf("%s holds %s yoctoNEAR, want %s (%d succeeded transfers of %d)", relayReceiver, got, want, succeeded, deposit)
	}
}
