package fakenear

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// TestFaultDropResponse: the transaction is applied and the waiting answer written to nobody:
// the connection closes, the client's outcome is unknown, the ledger shows it landed.
func TestFaultDropResponse(t *testing.T) {
	f, c := testChain(t, Config{})
	must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultDropResponse, Next: 1, Methods: []string{"send_tx"}}}}))
	raw, h := signTx(t, f, txSpec{})
	res := sendAsync(c, raw, near.TxFinal)
	awaitPending(t, f, h)
	f.StepN(1 + DefaultFinalityLag)
	r := result(t, res)
	var te *near.TransportError
	if r.err == nil || !near.IsOutcomeUnknown(r.err) || !errors.As(r.err, &te) || te.StatusCode != 0 {
		t.Fatalf("dropped answer: %v, want a transport error without status", r.err)
	}
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("ledger %v, want landed", k)
	}
	// The rule was for one request: the next one is answered.
	if _, err := c.Block(context.Background(), near.FinalityFinal); err != nil {
		t.Fatal(err)
	}
	if len(f.Endpoints()[0].Faults().Rules) != 0 {
		t.Fatal("a spent next-N rule is still there")
	}
}

// TestFaultStatus: HTTP 503 before handling leaves no trace; 408 after handling comes back
// although the transaction was applied.
func TestFaultStatus(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	var te *near.TransportError

	must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultStatus, Status: 503, Next: 1}}}))
	raw, h := signTx(t, f, txSpec{})
	_, err := c.SendTx(ctx, raw, near.TxNone)
	if !errors.As(err, &te) || te.StatusCode != 503 || !near.IsOutcomeUnknown(err) {
		t.Fatalf("503 before: %v", err)
	}
	f.Step()
	if k := kinds(f, h); len(k) != 0 {
		t.Fatalf("a request answered 503 before handling left %v", k)
	}

	must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultStatus, Status: 408, After: true, Next: 1}}}))
	_, err = c.SendTx(ctx, raw, near.TxNone)
	if !errors.As(err, &te) || te.StatusCode != 408 {
		t.Fatalf("408 after: %v", err)
	}
	f.Step()
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("ledger %v, want landed despite the 408", k)
	}
}

// TestFaultTimeout: TIMEOUT_ERROR at once, the transaction accepted all the same.
func TestFaultTimeout(t *testing.T) {
	// A poll timeout longer than the test's patience: only the fault can answer in time.
	f, c := testChain(t, Config{PollTimeout: time.Minute})
	must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultTimeout, Next: 1, Methods: []string{"send_tx"}}}}))
	raw, h := signTx(t, f, txSpec{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.SendTx(ctx, raw, near.TxFinal)
	var te *near.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("%v, want TIMEOUT_ERROR", err)
	}
	if !f.Pending(h) {
		t.Fatal("the transaction was not accepted")
	}
	f.Step()
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("ledger %v", k)
	}
}

// TestFaultLose: accepted with NONE, never lands, unknown to tx; the same bytes sent again land.
func TestFaultLose(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultLose, Next: 1}}}))
	raw, h := signTx(t, f, txSpec{})
	if out, err := c.SendTx(ctx, raw, near.TxNone); err != nil || out.FinalExecutionStatus != near.TxNone {
		t.Fatalf("%+v, %v", out, err)
	}
	f.StepN(3)
	if _, err := c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID, WaitUntil: near.TxNone}); !isUnknownTx(err) {
		t.Fatalf("lost transaction: %v, want UNKNOWN_TRANSACTION", err)
	}
	if k := kinds(f, h); !sameKinds(k, Lost) {
		t.Fatalf("ledger %v, want lost", k)
	}
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if k := kinds(f, h); !sameKinds(k, Lost, Landed) {
		t.Fatalf("ledger %v, want lost then landed", k)
	}
}

// TestFaultForeignNonce: a foreign sender takes the nonce of the transaction sent; it is dropped
// when the block is built, and the waiting sender gets InvalidNonce.
func TestFaultForeignNonce(t *testing.T) {
	f, c := testChain(t, Config{})
	must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultForeignNonce, Next: 1}}}))
	raw, h := signTx(t, f, txSpec{})
	n := nonceOf(t, f, relayerID, relayerKey) + 1
	res := sendAsync(c, raw, near.TxFinal)
	awaitPending(t, f, h)
	f.Step()
	wantInvalidTx(t, result(t, res).err, "InvalidNonce")
	var foreign, mine []LedgerEntry
	for _, e := range f.Ledger() {
		if e.Foreign {
			foreign = append(foreign, e)
		} else {
			mine = append(mine, e)
		}
	}
	if len(foreign) != 1 || foreign[0].Kind != Landed || foreign[0].Nonce != n {
		t.Fatalf("foreign entries %+v, want one landing with nonce %d", foreign, n)
	}
	if len(mine) != 1 || mine[0].Kind != Dropped || mine[0].ReasonName != "InvalidNonce" {
		t.Fatalf("own entries %+v", mine)
	}
}

// TestBumpNonce: a foreign sender's transaction lands in the next block with the key's nonce + 1
// (or the nonce given), so a transaction signed with the old next nonce is refused.
func TestBumpNonce(t *testing.T) {
	f, c := testChain(t, Config{})
	n := nonceOf(t, f, relayerID, relayerKey)
	raw, _ := signTx(t, f, txSpec{nonce: n + 1})
	if _, err := f.BumpNonce(relayerID, relayerKey.PublicKey(), 0); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if got := nonceOf(t, f, relayerID, relayerKey); got != n+1 {
		t.Fatalf("nonce %d after a bump, want %d", got, n+1)
	}
	if _, err := f.BumpNonce(relayerID, relayerKey.PublicKey(), n+50); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if got := nonceOf(t, f, relayerID, relayerKey); got != n+50 {
		t.Fatalf("nonce %d after a bump to %d", got, n+50)
	}
	_, err := c.SendTx(context.Background(), raw, near.TxFinal)
	wantInvalidTx(t, err, "InvalidNonce")
	if _, err := f.BumpNonce(relayerID, bobKey.PublicKey(), 0); err == nil {
		t.Fatal("bumping a key the account does not have")
	}
}

// statusCodes sends n block requests and returns their HTTP statuses.
func statusCodes(t *testing.T, url string, n int) []int {
	t.Helper()
	body := []byte(`{"jsonrpc":"2.0","id":"1","method":"block","params":{"finality":"final"}}`)
	var out []int
	for range n {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, resp.StatusCode)
	}
	return out
}

// TestFaultRateIsSeeded: a rate draws from the seeded randomness: the same seed gives the same
// faults, another seed others; Next fires first.
func TestFaultRateIsSeeded(t *testing.T) {
	pattern := func(seed uint64) []int {
		f := Start(t, Config{Manual: true, Seed: seed})
		must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultStatus, Rate: 0.5, Next: 2}}}))
		return statusCodes(t, f.Endpoints()[0].URL(), 40)
	}
	a, b, other := pattern(7), pattern(7), pattern(8)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different faults:\n%v\n%v", a, b)
	}
	if slices.Equal(a, other) {
		t.Fatalf("seeds 7 and 8 gave the same faults %v", a)
	}
	if a[0] != 503 || a[1] != 503 {
		t.Fatalf("next 2 did not fire first: %v", a)
	}
	failed := 0
	for _, s := range a[2:] {
		if s == 503 {
			failed++
		}
	}
	if failed < 8 || failed > 30 {
		t.Fatalf("%d of 38 failed at rate 0.5", failed)
	}
}

// TestLatencyDelayLine: latency delays both directions; bytes of one connection keep their
// order (pipelined requests are handled in the order written); requests on different
// connections may be handled in another order than sent, by their jitter.
func TestLatencyDelayLine(t *testing.T) {
	f, c := testChain(t, Config{})
	ep := f.Endpoints()[0]

	t.Run("round trip", func(t *testing.T) {
		must(t, ep.SetFaults(Faults{Latency: 100 * time.Millisecond}))
		start := time.Now()
		if _, err := c.Block(context.Background(), near.FinalityFinal); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("round trip %v with 100ms one-way latency", d)
		}
	})

	// Transactions with a bad signature are refused when handled: the ledger's order is the
	// order of handling.
	n := nonceOf(t, f, relayerID, relayerKey)
	invalid := func(i int) []byte {
		raw, _ := signTx(t, f, txSpec{nonce: n + 1 + uint64(i)})
		raw[len(raw)-1] ^= 1
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint(i), "method": "send_tx",
			"params": map[string]any{"signed_tx_base64": b64(raw), "wait_until": "NONE"}})
		return body
	}
	handled := func(from int) []uint64 {
		var out []uint64
		for _, e := range f.Ledger()[from:] {
			out = append(out, e.Nonce-n-1)
		}
		return out
	}

	t.Run("one connection keeps order", func(t *testing.T) {
		must(t, ep.SetFaults(Faults{Latency: 100 * time.Millisecond, Jitter: 20 * time.Millisecond}))
		from := len(f.Ledger())
		start := time.Now()
		conn, err := net.Dial("tcp", ep.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		const k = 8
		for i := range k { // pipelined: every request written before any answer is read
			body := invalid(i)
			fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			// Apart, so that each request arrives as a chunk of its own with its own jitter:
			// the traffic pattern under test, not a synchronization.
			time.Sleep(3 * time.Millisecond)
		}
		br := bufio.NewReader(conn)
		for i := range k {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
			var msg struct{ ID string }
			json.NewDecoder(resp.Body).Decode(&msg)
			resp.Body.Close()
			if msg.ID != fmt.Sprint(i) {
				t.Fatalf("answer %d has id %s", i, msg.ID)
			}
		}
		if got := handled(from); !slices.Equal(got, []uint64{0, 1, 2, 3, 4, 5, 6, 7}) {
			t.Fatalf("handled in order %v", got)
		}
		// The requests travel together: the 8 answers take about one round trip, not 8
		// latencies as a pause per request would.
		if d := time.Since(start); d < 200*time.Millisecond || d > 700*time.Millisecond {
			t.Fatalf("8 pipelined requests took %v with 100ms one-way latency, want about one round trip", d)
		}
	})

	t.Run("connections may reorder", func(t *testing.T) {
		must(t, ep.SetFaults(Faults{Jitter: 300 * time.Millisecond}))
		from := len(f.Ledger())
		const k = 8
		var wg sync.WaitGroup
		for i := range k {
			body := invalid(i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A client per request: a connection each.
				hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
				resp, err := hc.Post(ep.URL(), "application/json", bytes.NewReader(body))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			time.Sleep(2 * time.Millisecond) // the sending order under test, not a synchronization
		}
		wg.Wait()
		got := handled(from)
		if len(got) != k {
			t.Fatalf("handled %v", got)
		}
		if slices.IsSorted(got) {
			t.Fatalf("8 connections with 300ms jitter were handled in the order sent: %v", got)
		}
	})
}

// TestLateEndpoint: two endpoints over one chain, one forwarding to the pool two blocks late. A
// transaction sent to it alone lands late; one overtaken by a later nonce sent to the other
// endpoint is dropped when it arrives.
func TestLateEndpoint(t *testing.T) {
	f, _ := testChain(t, Config{}, EndpointConfig{Name: "prompt"}, EndpointConfig{Name: "late", ForwardDelayBlocks: 2})
	prompt, late := f.Client(t, f.Endpoint("prompt")), f.Client(t, f.Endpoint("late"))
	ctx := context.Background()
	n := nonceOf(t, f, relayerID, relayerKey)

	raw, h := signTx(t, f, txSpec{nonce: n + 1})
	res := sendAsync(late, raw, near.TxIncluded)
	awaitPending(t, f, h)
	if f.PoolSize() != 0 {
		t.Fatal("the late endpoint put the transaction in the pool at once")
	}
	f.StepN(2)
	if k := kinds(f, h); len(k) != 0 {
		t.Fatalf("landed before its delay: %v", k)
	}
	f.Step()
	if r := result(t, res); r.err != nil || *r.out.TransactionHash != h {
		t.Fatalf("late send: %+v, %v", r.out, r.err)
	}

	n += 1
	first, hFirst := signTx(t, f, txSpec{nonce: n + 1})
	second, hSecond := signTx(t, f, txSpec{nonce: n + 2})
	if _, err := late.SendTx(ctx, first, near.TxNone); err != nil {
		t.Fatal(err)
	}
	if _, err := prompt.SendTx(ctx, second, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.StepN(3)
	if !sameKinds(kinds(f, hSecond), Landed) {
		t.Fatalf("second: %v", kinds(f, hSecond))
	}
	e := f.LedgerOf(hFirst)
	if len(e) != 1 || e[0].Kind != Dropped || e[0].ReasonName != "InvalidNonce" || e[0].Endpoint != "late" {
		t.Fatalf("first: %+v, want dropped InvalidNonce on arrival", e)
	}

	// The same bytes sent to both: the prompt endpoint's copy lands in the next block, and the
	// late copy is nothing new when it arrives.
	both, hBoth := signTx(t, f, txSpec{})
	for _, c := range []*near.Client{late, prompt} {
		if _, err := c.SendTx(ctx, both, near.TxNone); err != nil {
			t.Fatal(err)
		}
	}
	f.Step()
	if k := kinds(f, hBoth); !sameKinds(k, Landed) || f.LedgerOf(hBoth)[0].Endpoint != "prompt" {
		t.Fatalf("sent to both: %+v, want landed through the prompt endpoint", f.LedgerOf(hBoth))
	}
	f.StepN(3)
	if k := kinds(f, hBoth); !sameKinds(k, Landed) {
		t.Fatalf("after the late copy arrived: %v", k)
	}
}
