package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Nodes listening on every interface (0.0.0.0) with --advertise-addr form a cluster through
// the advertised addresses only: replicas are added and promoted (Raft dials the advertised
// Raft address, the reconciler reads applied indexes over the advertised HTTP address),
// /v1/cluster shows the advertised HTTP addresses, and requests are forwarded between nodes
// (actor remoting dials the advertised remote address).
func TestAdvertisedAddresses(t *testing.T) {
	c := startClusterBinding(t, true)
	var v clusterView
	if err := c.getJSON(c.nodes[0], "/v1/cluster", &v); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, n := range c.nodes {
		want[n.Config.NodeID] = n.HTTPAddr
	}
	if len(v.Members) != len(c.nodes) {
		t.Fatalf("members %+v, want %d", v.Members, len(c.nodes))
	}
	for _, m := range v.Members {
		if m.HTTPAddr != want[m.NodeID] {
			t.Errorf("member %s advertises http_addr %q, want %q", m.NodeID, m.HTTPAddr, want[m.NodeID])
		}
	}

	post := func(url, body string) (int, string) {
		t.Helper()
		resp, err := c.hc.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// 16 partitions over 3 nodes: 20 nonces issued through one node and consumed through
	// another go through remote forwarding many times over.
	for i := range 20 {
		in, out, again := c.nodes[i%3], c.nodes[(i+1)%3], c.nodes[(i+2)%3]
		code, body := post(in.URL("/v1/nonces"), `{"org_id":"adv"}`)
		if code != http.StatusCreated {
			t.Fatalf("issue through %s: %d %s", in.Config.NodeID, code, body)
		}
		var issued struct{ Nonce string }
		if err := json.Unmarshal([]byte(body), &issued); err != nil || issued.Nonce == "" {
			t.Fatalf("issue answered %s (%v)", body, err)
		}
		consume := fmt.Sprintf("/v1/nonces/%s/consume", issued.Nonce)
		if code, body := post(out.URL(consume), `{"org_id":"adv"}`); code != http.StatusOK {
			t.Fatalf("consume through %s: %d %s", out.Config.NodeID, code, body)
		}
		if code, body := post(again.URL(consume), `{"org_id":"adv"}`); code != http.StatusConflict {
			t.Fatalf("second consume through %s: %d %s, want 409", again.Config.NodeID, code, body)
		}
	}
}
