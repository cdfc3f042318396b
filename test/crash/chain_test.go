package crash

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/chain"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// A three-node cluster anchors a chain on the fake Arweave node (a process of its own) while
// the node leading the chain's partition is SIGKILLed mid-upload, and restarted: every event
// accepted is anchored exactly once — the chain verifies on the node, and every transaction
// the node mined is on the chain (no orphan, no fork).
func TestChainSurvivesKill(t *testing.T) {
	// The fake node, as a process.
	gwBin := proc.Build(t, "./test/fakearweave/cmd/fakearweave")
	gwAddr := proc.FreeAddr(t)
	gw := exec.Command(gwBin, "--addr", gwAddr, "--block-interval", "50ms")
	out, _ := gw.StdoutPipe()
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Process.Kill(); _ = gw.Wait() })
	if !bufio.NewScanner(out).Scan() {
		t.Fatal("fakearweave did not start")
	}
	gateway := "http://" + gwAddr

	dir := t.TempDir()
	wallet := arweave.TestWalletJWK(t)
	walletFile := filepath.Join(dir, "wallet.json")
	tokenFile := filepath.Join(dir, "chain.token")
	token := strings.Repeat("c", 40)
	for path, b := range map[string][]byte{walletFile: wallet, tokenFile: []byte(token)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	nodes := proc.StartCluster(t, proc.ClusterConfig{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, N: 3, TLSDir: filepath.Join(dir, "tls"),
		Flags: append(append([]string{}, fastFlags...), "--arweave-gateway", gateway, "--arweave-wallet", walletFile,
			"--chain-token-file", tokenFile, "--chain-max-in-flight", "8", "--chain-poll-interval", "200ms")})
	for _, n := range nodes {
		n.WaitReady(60 * time.Second)
	}
	waitSettled(t, nodes[0])

	// Events go to every node in turn; a refused one (the leader dying) is sent again, as a
	// client would: an identical repeat is answered 200 and adds nothing.
	const total = 60
	var accepted atomic.Int64
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 5 * time.Second}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 4 {
				body := fmt.Sprintf(`{"entity_id":"device-%d","ver":1,"op":"create","vis":"public","manifest":{"n":%d}}`, i, i)
				for attempt := 0; ; attempt++ {
					req, _ := http.NewRequest("POST", nodes[(i+attempt)%3].URL("/v1/chains/main/events"), strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := hc.Do(req)
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == 201 || resp.StatusCode == 200 {
							accepted.Add(1)
							break
						}
					}
					if attempt > 100 {
						t.Errorf("event %d never accepted", i)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	await.True(t, 30*time.Second, "a third accepted", func() bool { return accepted.Load() >= total/3 })
	p := actors.PartitionOf(chain.KindName, "main", partitions)
	victim := leaderOf(t, nodes, p)
	victim.Kill()
	t.Logf("SIGKILL %s, leader of the chain's partition %d, after %d events accepted", victim.Config.NodeID, p, accepted.Load())
	wg.Wait()
	victim.RestartReady()

	var head chain.Head
	defer func() {
		if t.Failed() {
			for _, n := range nodes {
				if resp, err := hc.Get(n.URL("/v1/chains/main/head")); err == nil {
					var b [512]byte
					k, _ := resp.Body.Read(b[:])
					resp.Body.Close()
					t.Logf("%s: head %s", n.Config.NodeID, b[:k])
				}
			}
			for seq := head.ConfirmedSeq; seq <= head.Seq; seq++ {
				if resp, err := hc.Get(nodes[0].URL(fmt.Sprintf("/v1/chains/main/events/%d", seq))); err == nil {
					var e struct {
						TxID   string `json:"tx_id"`
						Status string `json:"status"`
					}
					_ = json.NewDecoder(resp.Body).Decode(&e)
					resp.Body.Close()
					st, _ := hc.Get(gateway + "/tx/" + e.TxID + "/status")
					var b [300]byte
					k, _ := st.Body.Read(b[:])
					st.Body.Close()
					t.Logf("event %d: %s %s; node: %d %s", seq, e.TxID, e.Status, st.StatusCode, b[:k])
					if seq == head.ConfirmedSeq+1 {
						resp, _ := hc.Get(gateway + "/tx/" + e.TxID)
						var b [200]byte
						k, _ := resp.Body.Read(b[:])
						resp.Body.Close()
						t.Logf("GET /tx: %d %s", resp.StatusCode, b[:k])
					}
				}
			}
			if resp, err := hc.Get(gateway + "/info"); err == nil {
				var b [300]byte
				k, _ := resp.Body.Read(b[:])
				resp.Body.Close()
				t.Logf("node info %s", b[:k])
			}
		}
	}()
	await.True(t, 90*time.Second, "every event confirmed", func() bool {
		resp, err := hc.Get(nodes[0].URL("/v1/chains/main/head"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&head) == nil && head.ConfirmedSeq == total
	})
	r := chain.Verify(context.Background(), arweave.NewClient(gateway, nil), *head.TxID, nil)
	if !r.OK || r.Checked != total {
		t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
	var mined []string
	resp, err := hc.Get(gateway + "/admin/mined")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&mined)
	resp.Body.Close()
	if len(mined) != total {
		t.Fatalf("the node mined %d transactions for %d events: an orphan or a fork", len(mined), total)
	}
}

// leaderOf is the node leading partition p, as /v1/cluster says.
func leaderOf(t *testing.T, nodes []*proc.Node, p uint32) *proc.Node {
	t.Helper()
	for _, part := range clusterView(t, nodes[0]).Partitions {
		if uint32(part.ID) == p {
			for _, n := range nodes {
				if n.Config.NodeID == part.Leader {
					return n
				}
			}
		}
	}
	t.Fatalf("no leader of partition %d", p)
	return nil
}
