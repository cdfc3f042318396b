package fakenear

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// getLedger reads GET /fake/ledger?query from base (an endpoint or admin URL).
func getLedger(t testing.TB, base, query string) []LedgerEntry {
	t.Helper()
	resp, err := http.Get(base + "fake/ledger?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Entries []LedgerEntry `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ledger: HTTP %d, %v", resp.StatusCode, err)
	}
	return body.Entries
}

// adminCall sends a JSON body to an admin path and returns the status and answer.
func adminCall(t testing.TB, method, url string, body any) (int, []byte) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestLedger: every landing, refusal, drop and loss is recorded with its details, and GET
// /fake/ledger serves the same entries as the Go API, filtered.
func TestLedger(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	n := nonceOf(t, f, relayerID, relayerKey)

	landed, hLanded := signTx(t, f, txSpec{nonce: n + 2, actions: []near.Action{near.Transfer{Deposit: near.U128From64(9)}}})
	refused, hRefused := signTx(t, f, txSpec{nonce: n})
	if _, err := c.SendTx(ctx, landed, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if _, err := c.SendTx(ctx, refused, near.TxNone); err != nil {
		t.Fatal(err)
	}
	must(t, f.SetFaults(Faults{Rules: []FaultRule{{Kind: FaultLose, Next: 1}}}))
	lost, hLost := signTx(t, f, txSpec{nonce: n + 3})
	if _, err := c.SendTx(ctx, lost, near.TxNone); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BumpNonce(relayerID, relayerKey.PublicKey(), n+4); err != nil {
		t.Fatal(err)
	}
	stale, hStale := signTx(t, f, txSpec{nonce: n + 4})
	if _, err := c.SendTx(ctx, stale, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()

	all := f.Ledger()
	byHash := map[string]LedgerEntry{}
	for i, e := range all {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
		byHash[e.Hash] = e
	}
	l := byHash[hLanded.String()]
	if l.Kind != Landed || l.Signer != relayerID || l.PublicKey != relayerKey.PublicKey().String() || l.Nonce != n+2 ||
		l.Receiver != bobID || string(l.Actions) != `[{"Transfer":{"deposit":"9"}}]` || string(l.Status) != `{"SuccessValue":""}` ||
		l.Height != f.Head().Height-1 || l.BlockHash == "" {
		t.Fatalf("landed entry %+v", l)
	}
	if r := byHash[hRefused.String()]; r.Kind != Refused || r.ReasonName != "InvalidNonce" ||
		string(r.Reason) != `{"InvalidNonce":{"tx_nonce":`+itoa(n)+`,"ak_nonce":`+itoa(n+2)+`}}` {
		t.Fatalf("refused entry %+v", r)
	}
	if e := byHash[hLost.String()]; e.Kind != Lost {
		t.Fatalf("lost entry %+v", e)
	}
	if e := byHash[hStale.String()]; e.Kind != Dropped || e.ReasonName != "InvalidNonce" {
		t.Fatalf("dropped entry %+v", e)
	}

	base := f.Endpoints()[0].URL()
	if got := getLedger(t, base, ""); !reflect.DeepEqual(normalize(got), normalize(all)) {
		t.Fatalf("GET /fake/ledger differs from Ledger():\n%+v\n%+v", got, all)
	}
	if got := getLedger(t, base, "kind=dropped"); len(got) != 1 || got[0].Hash != hStale.String() {
		t.Fatalf("kind=dropped: %+v", got)
	}
	if got := getLedger(t, base, "hash="+hLanded.String()); len(got) != 1 || got[0].Kind != Landed {
		t.Fatalf("hash filter: %+v", got)
	}
	if got := getLedger(t, base, "after_seq="+itoa(all[len(all)-2].Seq)); len(got) != 1 {
		t.Fatalf("after_seq: %+v", got)
	}
	if got := f.LedgerSince(len(all) - 2); len(got) != 2 || got[0].Seq != all[len(all)-2].Seq || got[1].Seq != all[len(all)-1].Seq {
		t.Fatalf("LedgerSince(%d): %+v", len(all)-2, got)
	}
	if got := f.LedgerSince(len(all)); got != nil {
		t.Fatalf("LedgerSince(all): %+v", got)
	}
}

func itoa(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// normalize drops what a JSON round trip changes (the monotonic clock, raw JSON spacing).
func normalize(es []LedgerEntry) []string {
	var out []string
	for _, e := range es {
		b, _ := json.Marshal(e)
		out = append(out, string(b))
	}
	return out
}

// TestAdminEndpoints drives the admin API in-process: accounts, keys, faults, blocks, status.
func TestAdminEndpoints(t *testing.T) {
	f, c := testChain(t, Config{})
	base := f.Endpoints()[0].URL() + "fake/"
	newKey := KeyFromLabel("admin")

	if s, body := adminCall(t, "POST", base+"accounts", Account{ID: "carol.test", Balance: near.U128From64(5),
		Keys: []AccountKey{{PublicKey: newKey.PublicKey()}}}); s != http.StatusCreated {
		t.Fatalf("add account: %d %s", s, body)
	}
	if s, _ := adminCall(t, "POST", base+"accounts", Account{ID: "carol.test"}); s != http.StatusConflict {
		t.Fatalf("add account twice: %d", s)
	}
	if v, err := c.ViewAccessKey(context.Background(), "carol.test", newKey.PublicKey(), near.FinalityFinal); err != nil ||
		v.Nonce != f.Head().Height*nonceMultiplier {
		t.Fatalf("key of the added account: %+v, %v", v, err)
	}
	second := KeyFromLabel("admin 2")
	if s, body := adminCall(t, "POST", base+"keys", map[string]any{"account_id": "carol.test", "public_key": second.PublicKey(), "nonce": 77}); s != http.StatusCreated {
		t.Fatalf("add key: %d %s", s, body)
	}
	if n := nonceOf(t, f, "carol.test", second); n != 77 {
		t.Fatalf("added key nonce %d", n)
	}

	if s, body := adminCall(t, "PUT", base+"faults", map[string]any{"endpoint": "rpc0", "latency": "1ms",
		"rules": []FaultRule{{Kind: FaultStatus, Status: 503, Next: 1}}}); s != http.StatusOK {
		t.Fatalf("set faults: %d %s", s, body)
	}
	if fs := f.Endpoints()[0].Faults(); fs.Latency != time.Millisecond || len(fs.Rules) != 1 {
		t.Fatalf("faults %+v", fs)
	}
	if s, _ := adminCall(t, "PUT", base+"faults", map[string]any{"rules": []FaultRule{{Kind: "bogus"}}}); s != http.StatusBadRequest {
		t.Fatalf("bad fault kind: %d", s)
	}
	if s, _ := adminCall(t, "PUT", base+"faults", map[string]any{"endpoint": "nope"}); s != http.StatusNotFound {
		t.Fatalf("unknown endpoint: %d", s)
	}
	if _, err := c.Block(context.Background(), near.FinalityFinal); err == nil {
		t.Fatal("the 503 fault set through the admin API did not fire")
	}
	if s, _ := adminCall(t, "DELETE", base+"faults", nil); s != http.StatusOK || len(f.Endpoints()[0].Faults().Rules) != 0 {
		t.Fatalf("clear faults: %d", s)
	}

	h0 := f.Head().Height
	if s, body := adminCall(t, "POST", base+"blocks", map[string]int{"count": 3}); s != http.StatusOK || f.Head().Height != h0+3 {
		t.Fatalf("blocks: %d %s", s, body)
	}
	if s, body := adminCall(t, "POST", base+"nonce-bump", map[string]any{"account_id": "carol.test", "public_key": second.PublicKey()}); s != http.StatusOK {
		t.Fatalf("nonce-bump: %d %s", s, body)
	}
	f.Step()
	if n := nonceOf(t, f, "carol.test", second); n != 78 {
		t.Fatalf("nonce after bump %d", n)
	}
	s, body := adminCall(t, "GET", base+"status", nil)
	var st StatusInfo
	if err := json.Unmarshal(body, &st); s != http.StatusOK || err != nil || st.Height != f.Head().Height || len(st.Endpoints) != 1 {
		t.Fatalf("status: %d %s", s, body)
	}
}
