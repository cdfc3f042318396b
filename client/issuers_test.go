package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A consume goes first to the node that issued the nonce (which leads its shard, so nothing
// is forwarded), and on to the others when that node cannot be reached.
func TestConsumeGoesToTheIssuer(t *testing.T) {
	var mu sync.Mutex
	consumedAt := map[string]int{} // nonce → the server that took its consume
	var urls []string
	var servers []*httptest.Server
	for i := range 3 {
		n := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			mu.Lock()
			defer mu.Unlock()
			if r.URL.Path == "/v1/nonces" {
				n++
				w.WriteHeader(http.StatusCreated)
				json.NewEncoder(w).Encode(Nonce{Nonce: fmt.Sprintf("s%d-%d", i, n), OrgID: "org"})
				return
			}
			nonce := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/nonces/"), "/consume")
			consumedAt[nonce] = i
			json.NewEncoder(w).Encode(Consumed{Nonce: nonce, UsedAt: 1})
		}))
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
		urls = append(urls, srv.URL)
	}
	c, err := New(urls)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var nonces []string
	for range 9 {
		nn, err := c.IssueNonce(ctx, "org")
		if err != nil {
			t.Fatal(err)
		}
		nonces = append(nonces, nn.Nonce)
	}
	for _, n := range nonces[:6] {
		if _, err := c.ConsumeNonce(ctx, n, ConsumeRequest{OrgID: "org"}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		at := consumedAt[n]
		mu.Unlock()
		if want := int(n[1] - '0'); at != want {
			t.Errorf("nonce %s issued by server %d consumed at server %d", n, want, at)
		}
	}
	servers[0].Close()
	for _, n := range nonces[6:] {
		if _, err := c.ConsumeNonce(ctx, n, ConsumeRequest{OrgID: "org"}); err != nil {
			t.Fatalf("consume %s with its issuer down: %v", n, err)
		}
		mu.Lock()
		at := consumedAt[n]
		mu.Unlock()
		if n[1] == '0' && at == 0 {
			t.Errorf("nonce %s consumed at the server that is down", n)
		}
	}
}
