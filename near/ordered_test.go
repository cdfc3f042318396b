package near_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

// sendResult is the end of one OrderedSender.SendTx call.
type sendResult struct {
	out *near.TxOutcome
	err error
}

// sendChain sends txs with s, each call started once the previous one's request was written,
// as a key actor releases the send of nonce N+1 once that of N is written. ctxOf gives each
// call's context (nil: background). It returns a channel of each call's result and a channel
// closed once every request was written.
func sendChain(t testing.TB, s *near.OrderedSender, txs [][]byte, ctxOf func(i int) context.Context) ([]chan sendResult, <-chan struct{}) {
	t.Helper()
	results := make([]chan sendResult, len(txs))
	prev := make(chan struct{})
	close(prev)
	for i, tx := range txs {
		results[i] = make(chan sendResult, 1)
		next := make(chan struct{})
		ctx := context.Background()
		if ctxOf != nil {
			ctx = ctxOf(i)
		}
		go func(prev <-chan struct{}, next chan struct{}, res chan sendResult) {
			<-prev
			out, err := s.SendTx(ctx, tx, near.TxNone, func() { close(next) }) // a second call panics
			select {
			case <-next:
			default:
				t.Errorf("SendTx returned before its written callback")
			}
			res <- sendResult{out, err}
		}(prev, next, results[i])
		prev = next
	}
	return results, prev
}

func wait(t testing.TB, ch <-chan sendResult) sendResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no result within 10s")
		return sendResult{}
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
}

// rpcServer is an httptest JSON-RPC node whose handler the test scripts; it counts requests and
// connections.
type rpcServer struct {
	srv    *httptest.Server
	reqs   atomic.Int32
	conns  atomic.Int32
	closed chan struct{} // a value per connection closed

	mu  sync.Mutex
	txs []string // the signed_tx_base64 of every request, in the order handled
}

// handled returns the first byte of each transaction sent, in the order the server handled
// them (dummyTxs numbers them so).
func (s *rpcServer) handled() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []byte
	for _, b64 := range s.txs {
		b, _ := base64.StdEncoding.DecodeString(b64)
		if len(b) > 0 {
			out = append(out, b[0])
		}
	}
	return out
}

func newRPCServer(t *testing.T, handle func(n int32, w http.ResponseWriter, id string) bool) *rpcServer {
	t.Helper()
	s := &rpcServer{closed: make(chan struct{}, 100)}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.reqs.Add(1)
		var req struct {
			ID     string `json:"id"`
			Method string `json:"method"`
			Params struct {
				Tx string `json:"signed_tx_base64"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Method != "send_tx" {
			t.Errorf("request %d: %+v, %v", n, req, err)
		}
		s.mu.Lock()
		s.txs = append(s.txs, req.Params.Tx)
		s.mu.Unlock()
		if handle != nil && handle(n, w, req.ID) {
			return
		}
		answerNone(w, req.ID)
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed:
			s.closed <- struct{}{}
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func answerNone(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%q,"result":{"final_execution_status":"NONE"}}`, id)
}

func hijackClose(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

func newSender(t testing.TB, urls ...string) *near.OrderedSender {
	t.Helper()
	c, err := near.NewClient(urls, near.WithCooldown(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Ordered()
	t.Cleanup(func() { s.Close() })
	return s
}

func dummyTxs(n int) [][]byte {
	txs := make([][]byte, n)
	for i := range txs {
		txs[i] = []byte{byte(i), 1, 2, 3}
	}
	return txs
}

// 200 transactions of one key, each sent once the previous request was written, reach the fake
// node in nonce order over 50ms of one-way latency with jitter: all land, in order, none is
// refused, and the sends take a few round trips, not 200.
func TestOrderedSenderKeepsNonceOrder(t *testing.T) {
	const n = 200
	f, s, kp, start, txs := keyChain(t, n)
	begin := time.Now()
	results, written := sendChain(t, s, txs, nil)
	waitClosed(t, written, "every request written")
	wroteIn := time.Since(begin)
	for i, ch := range results {
		if r := wait(t, ch); r.err != nil || r.out.FinalExecutionStatus != near.TxNone {
			t.Fatalf("send %d: %+v %v", i, r.out, r.err)
		}
	}
	answeredIn := time.Since(begin)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, _ := f.AccessKeyNonce("relayer.test", kp.PublicKey()); got == start+n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the transactions did not land within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	landedIn := time.Since(begin)

	landed, last := 0, start
	for _, e := range f.Ledger() {
		if e.PublicKey != kp.PublicKey().String() {
			continue
		}
		if e.Kind != fakenear.Landed {
			t.Fatalf("ledger: %s of nonce %d (%s)", e.Kind, e.Nonce, e.ReasonName)
		}
		if e.Nonce != last+1 {
			t.Fatalf("landed nonce %d after %d", e.Nonce, last)
		}
		landed++
		last = e.Nonce
	}
	if landed != n {
		t.Fatalf("%d landed, want %d", landed, n)
	}
	// 200 round trips would take 20s.
	if answeredIn > 2*time.Second {
		t.Fatalf("200 sends answered in %v with 50ms one-way latency: not pipelined", answeredIn)
	}
	t.Logf("%d sends in order on one connection, 50ms one-way latency: written in %v, answered in %v (%.0f tx/s), landed in %v (%.0f landed tx/s)",
		n, wroteIn, answeredIn, n/answeredIn.Seconds(), landedIn, n/landedIn.Seconds())
}

// keyChain starts a fake node with a block every 100ms and 50ms±10ms of one-way latency, and
// signs n transfers of one key with the nonces that follow the key's.
func keyChain(tb testing.TB, n int) (*fakenear.Fake, *near.OrderedSender, *near.KeyPair, uint64, [][]byte) {
	tb.Helper()
	kp := fakenear.KeyFromLabel("ordered")
	rich, _ := near.ParseU128("1000000000000000000000000000")
	f := fakenear.Start(tb, fakenear.Config{Seed: 7, ValidityPeriod: 1000, Accounts: []fakenear.Account{
		{ID: "relayer.test", Balance: rich, Keys: []fakenear.AccountKey{{PublicKey: kp.PublicKey()}}},
		{ID: "bob.test", Balance: near.U128From64(0)},
	}}, fakenear.EndpointConfig{Faults: fakenear.Faults{Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond}})
	s := newSender(tb, f.Endpoints()[0].URL())
	start, _ := f.AccessKeyNonce("relayer.test", kp.PublicKey())
	block := f.Head().Hash
	txs := make([][]byte, n)
	for i := range txs {
		tx := near.Transaction{SignerID: "relayer.test", PublicKey: kp.PublicKey(), Nonce: start + 1 + uint64(i),
			ReceiverID: "bob.test", BlockHash: block, Actions: []near.Action{near.Transfer{Deposit: near.U128From64(1)}}}
		signed, _, err := near.SignTransaction(tx, kp)
		if err != nil {
			tb.Fatal(err)
		}
		if txs[i], err = signed.Encode(); err != nil {
			tb.Fatal(err)
		}
	}
	return f, s, kp, start, txs
}

// BenchmarkOrderedSender sends b.N transfers of one key in order (each send started once the
// previous request was written) over 50ms of one-way latency, and reports the sends answered
// and the transactions landed per second. Run with e.g. -benchtime=1000x.
func BenchmarkOrderedSender(b *testing.B) {
	f, s, kp, start, txs := keyChain(b, b.N)
	b.ResetTimer()
	begin := time.Now()
	results, _ := sendChain(b, s, txs, nil)
	for i, ch := range results {
		if r := wait(b, ch); r.err != nil {
			b.Fatalf("send %d: %v", i, r.err)
		}
	}
	answered := time.Since(begin)
	for {
		if got, _ := f.AccessKeyNonce("relayer.test", kp.PublicKey()); got == start+uint64(b.N) {
			break
		}
		if time.Since(begin) > time.Minute {
			b.Fatal("the transactions did not land within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	landed := time.Since(begin)
	b.StopTimer()
	for _, e := range f.Ledger() {
		if e.PublicKey == kp.PublicKey().String() && e.Kind != fakenear.Landed {
			b.Fatalf("ledger: %s of nonce %d (%s)", e.Kind, e.Nonce, e.ReasonName)
		}
	}
	b.ReportMetric(float64(b.N)/answered.Seconds(), "answered/s")
	b.ReportMetric(float64(b.N)/landed.Seconds(), "landed/s")
}

// A connection dropped at the third request fails the third and every later pending call with
// outcome unknown; the first two are answered; the next call goes on a new connection.
func TestOrderedSenderConnectionDropped(t *testing.T) {
	gate := make(chan struct{})
	srv := newRPCServer(t, func(n int32, w http.ResponseWriter, _ string) bool {
		switch n {
		case 1:
			<-gate // until every request is on the connection
		case 3:
			hijackClose(t, w) // handled, then the answer is lost with the connection
			return true
		}
		return false
	})
	s := newSender(t, srv.srv.URL)
	results, written := sendChain(t, s, dummyTxs(5), nil)
	waitClosed(t, written, "every request written")
	close(gate)
	for i, ch := range results {
		if r := wait(t, ch); r.err != nil {
			t.Fatalf("send %d: %v", i, r.err)
		}
	}
	// The requests behind the lost answer died with the connection; they were written again,
	// in order, with the one whose answer was lost, before anything else.
	if got, want := srv.handled(), []byte{0, 1, 2, 2, 3, 4}; !bytes.Equal(got, want) {
		t.Fatalf("the server handled %v, want %v", got, want)
	}
	if _, err := s.SendTx(context.Background(), []byte{9}, near.TxNone, nil); err != nil {
		t.Fatalf("send after the drop: %v", err)
	}
	if got := srv.conns.Load(); got != 2 {
		t.Fatalf("%d connections, want 2", got)
	}
}

// Connections that break again and again (every third request kills one) still deliver a
// stream of sends in order: each request reaches the node, and a later call's request never
// goes before an earlier one's.
func TestOrderedSenderKeepsOrderAcrossBreaks(t *testing.T) {
	srv := newRPCServer(t, func(n int32, w http.ResponseWriter, _ string) bool {
		if n%3 == 0 {
			hijackClose(t, w)
			return true
		}
		return false
	})
	s := newSender(t, srv.srv.URL)
	const n = 40
	results, _ := sendChain(t, s, dummyTxs(n), nil)
	for i, ch := range results {
		if r := wait(t, ch); r.err != nil {
			t.Fatalf("send %d: %v", i, r.err)
		}
	}
	got := srv.handled()
	var high int = -1
	seen := map[byte]bool{}
	for i, b := range got {
		// A replay starts again at the oldest unanswered request: never past one not seen yet.
		if int(b) > high+1 {
			t.Fatalf("request %d carried tx %d before tx %d was handled: %v", i, b, high+1, got)
		}
		high = max(high, int(b))
		seen[b] = true
	}
	if len(seen) != n {
		t.Fatalf("%d of %d transactions reached the server: %v", len(seen), n, got)
	}
	t.Logf("%d transactions in %d requests on %d connections", n, len(got), srv.conns.Load())
}

// A request that breaks every connection it is written on fails as outcome unknown after
// MaxReplays replays; the calls behind it are not charged for it, and get their answers.
func TestOrderedSenderPoisonRequest(t *testing.T) {
	gate := make(chan struct{})
	srv := newRPCServer(t, nil)
	srv.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     string `json:"id"`
			Params struct {
				Tx string `json:"signed_tx_base64"`
			} `json:"params"`
		}
		json.Unmarshal(body, &req)
		srv.mu.Lock()
		srv.txs = append(srv.txs, req.Params.Tx)
		first := len(srv.txs) == 1
		srv.mu.Unlock()
		if first {
			<-gate
		}
		if b, _ := base64.StdEncoding.DecodeString(req.Params.Tx); len(b) > 0 && b[0] == 1 {
			hijackClose(t, w)
			return
		}
		answerNone(w, req.ID)
	})
	s := newSender(t, srv.srv.URL)
	results, written := sendChain(t, s, dummyTxs(4), nil)
	waitClosed(t, written, "every request written")
	close(gate)
	for i, ch := range results {
		r := wait(t, ch)
		if i == 1 {
			if !near.IsOutcomeUnknown(r.err) {
				t.Fatalf("poison send: got %v, want outcome unknown", r.err)
			}
			continue
		}
		if r.err != nil {
			t.Fatalf("send %d: %v", i, r.err)
		}
	}
	got := srv.handled()
	if n := bytes.Count(got, []byte{1}); n != near.MaxReplays+1 {
		t.Fatalf("the poison request was handled %d times, want %d: %v", n, near.MaxReplays+1, got)
	}
}

// A call whose context ends while it waits returns outcome unknown at once; the answers of the
// calls behind it still reach their own calls (the answer's id is checked against the
// request's), on the same connection.
func TestOrderedSenderCancelKeepsAlignment(t *testing.T) {
	gate := make(chan struct{})
	srv := newRPCServer(t, func(n int32, w http.ResponseWriter, _ string) bool {
		if n == 1 {
			<-gate
		}
		return false
	})
	s := newSender(t, srv.srv.URL)
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	results, written := sendChain(t, s, dummyTxs(6), func(i int) context.Context {
		if i == 2 {
			return ctx3
		}
		return context.Background()
	})
	waitClosed(t, written, "every request written")
	cancel3()
	if r := wait(t, results[2]); !near.IsOutcomeUnknown(r.err) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled send: got %v, want outcome unknown and context.Canceled", r.err)
	}
	close(gate)
	for i, ch := range results {
		if i == 2 {
			continue
		}
		if r := wait(t, ch); r.err != nil {
			t.Fatalf("send %d: %v", i, r.err)
		}
	}
	if _, err := s.SendTx(context.Background(), []byte{9}, near.TxNone, nil); err != nil {
		t.Fatalf("send after: %v", err)
	}
	if got, conns := srv.reqs.Load(), srv.conns.Load(); got != 7 || conns != 1 {
		t.Fatalf("%d requests on %d connections, want 7 on 1", got, conns)
	}
}

// A first endpoint that refuses connections is skipped for the next; the connection to it is
// kept for later calls.
func TestOrderedSenderFailover(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	srv := newRPCServer(t, nil)
	s := newSender(t, refused, srv.srv.URL)
	for i := range 3 {
		if _, err := s.SendTx(context.Background(), []byte{byte(i)}, near.TxNone, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if got := srv.conns.Load(); got != 1 {
		t.Fatalf("%d connections, want 1", got)
	}

	// Every endpoint down: outcome unknown, as Client says, and written is still called.
	s2 := newSender(t, refused)
	called := 0
	_, err = s2.SendTx(context.Background(), []byte{1}, near.TxNone, func() { called++ })
	if !near.IsOutcomeUnknown(err) || called != 1 {
		t.Fatalf("no endpoint: got %v with written called %d times", err, called)
	}
}

// HTTP 503 and a node's error answer are answers about one request: outcome unknown for the
// first, the node's error for the second, and the connection carries on.
func TestOrderedSenderErrorAnswers(t *testing.T) {
	srv := newRPCServer(t, func(n int32, w http.ResponseWriter, id string) bool {
		switch n {
		case 1:
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return true
		case 2:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%q,"error":{"name":"HANDLER_ERROR","cause":{"name":"INVALID_TRANSACTION","info":{}},"code":-32000,"message":"Server error","data":{"TxExecutionError":{"InvalidTxError":{"InvalidNonce":{"tx_nonce":5,"ak_nonce":6}}}}}}`, id)
			return true
		}
		return false
	})
	s := newSender(t, srv.srv.URL)
	results, _ := sendChain(t, s, dummyTxs(3), nil)
	if r := wait(t, results[0]); !near.IsOutcomeUnknown(r.err) {
		t.Fatalf("503: got %v, want outcome unknown", r.err)
	}
	var inv *near.InvalidNonceError
	if r := wait(t, results[1]); !near.IsRefused(r.err) || !errors.As(r.err, &inv) || inv.AkNonce != 6 {
		t.Fatalf("refusal: got %v", r.err)
	}
	if r := wait(t, results[2]); r.err != nil {
		t.Fatalf("after: %v", r.err)
	}
	if got := srv.conns.Load(); got != 1 {
		t.Fatalf("%d connections, want 1", got)
	}
}

// A connection the server closes while idle is replaced by the next call, without a failure.
func TestOrderedSenderServerClosesIdle(t *testing.T) {
	srv := newRPCServer(t, nil)
	s := newSender(t, srv.srv.URL)
	if _, err := s.SendTx(context.Background(), []byte{1}, near.TxNone, nil); err != nil {
		t.Fatal(err)
	}
	srv.srv.CloseClientConnections() // as a keep-alive timeout does
	deadline := time.Now().Add(5 * time.Second)
	for attempt := 0; ; attempt++ {
		// The close reaches the sender's reader shortly after: then the next call redials.
		time.Sleep(20 * time.Millisecond)
		_, err := s.SendTx(context.Background(), []byte{2}, near.TxNone, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after an idle close: %v", err)
		}
	}
	if got := srv.conns.Load(); got != 2 {
		t.Fatalf("%d connections, want 2", got)
	}
}

// Close fails the calls waiting for an answer (outcome unknown), and later calls fail at once
// with ErrSenderClosed.
func TestOrderedSenderClose(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	srv := newRPCServer(t, func(int32, http.ResponseWriter, string) bool { <-gate; return false })
	s := newSender(t, srv.srv.URL)
	results, written := sendChain(t, s, dummyTxs(2), nil)
	waitClosed(t, written, "every request written")
	s.Close()
	for i, ch := range results {
		if r := wait(t, ch); !near.IsOutcomeUnknown(r.err) {
			t.Fatalf("send %d: got %v, want outcome unknown", i, r.err)
		}
	}
	if _, err := s.SendTx(context.Background(), []byte{1}, near.TxNone, nil); !errors.Is(err, near.ErrSenderClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// Many goroutines sending at once, in no particular order: every call gets its own answer.
func TestOrderedSenderConcurrent(t *testing.T) {
	srv := newRPCServer(t, nil)
	s := newSender(t, srv.srv.URL)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.SendTx(context.Background(), []byte{byte(i)}, near.TxNone, nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A connection idle for the idle timeout is closed by the sender (its reader ends); the next
// call dials again.
func TestOrderedSenderIdle(t *testing.T) {
	srv := newRPCServer(t, nil)
	s := newSender(t, srv.srv.URL)
	s.SetIdleTimeout(50 * time.Millisecond)
	if _, err := s.SendTx(context.Background(), []byte{1}, near.TxNone, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
	if _, err := s.SendTx(context.Background(), []byte{2}, near.TxNone, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.conns.Load(); got != 2 {
		t.Fatalf("%d connections, want 2", got)
	}
}

// An answer that does not come within the client's timeout, on every connection the request is
// written again on (MaxReplays), fails the calls waiting with outcome unknown.
func TestOrderedSenderAnswerTimeout(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	srv := newRPCServer(t, func(int32, http.ResponseWriter, string) bool { <-gate; return false })
	c, err := near.NewClient([]string{srv.srv.URL}, near.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Ordered()
	defer s.Close()
	begin := time.Now()
	results, _ := sendChain(t, s, dummyTxs(2), nil)
	for i, ch := range results {
		if r := wait(t, ch); !near.IsOutcomeUnknown(r.err) {
			t.Fatalf("send %d: got %v, want outcome unknown", i, r.err)
		}
	}
	if d := time.Since(begin); d < 200*time.Millisecond || d > 3*time.Second {
		t.Fatalf("failed after %v with a 200ms timeout", d)
	}
}

// Over TLS, with the Client's TLS settings, and credentials of the URL sent as basic auth.
func TestOrderedSenderTLS(t *testing.T) {
	var auth atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		auth.Store(u + ":" + p + " " + r.Proto)
		var req struct{ ID string }
		json.NewDecoder(r.Body).Decode(&req)
		answerNone(w, req.ID)
	}))
	defer srv.Close()
	url := "https://user:secret@" + srv.Listener.Addr().String() + "/"
	c, err := near.NewClient([]string{url}, near.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Ordered()
	defer s.Close()
	results, _ := sendChain(t, s, dummyTxs(3), nil)
	for i, ch := range results {
		if r := wait(t, ch); r.err != nil {
			t.Fatalf("send %d: %v", i, r.err)
		}
	}
	if got := auth.Load(); got != "user:secret HTTP/1.1" {
		t.Fatalf("the server saw %v", got)
	}
}

// An endpoint that takes the requests, drops the connection, then closes every new connection
// at once: the lost calls fail as outcome unknown after a bounded number of connections, rather
// than being dialed for ever, and the sender still closes.
func TestOrderedSenderEndpointClosingAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if conns.Add(1) == 1 {
				go func() {
					buf := make([]byte, 4096)
					c.Read(buf) // the requests arrive; no answer comes
					c.Close()
				}()
				continue
			}
			c.Close()
		}
	}()
	s := newSender(t, "http://"+ln.Addr().String()+"/")
	results, _ := sendChain(t, s, dummyTxs(3), nil)
	for i, ch := range results {
		if r := wait(t, ch); !near.IsOutcomeUnknown(r.err) {
			t.Fatalf("send %d: got %v, want outcome unknown", i, r.err)
		}
	}
	// Each call is at the head of at most MaxReplays+1 connections.
	if n := conns.Load(); n > 1+3*(near.MaxReplays+1) {
		t.Fatalf("%d connections for 3 lost calls", n)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	waitClosed(t, done, "Close")
}
