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
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// A three-node cluster anchors a chain on the fake Arweave node (a process of its own) while
// the node leading the chain's partition is SIGKILLed twice mid-upload and the fake drops 15 %
// of its answers after taking a transaction: 300 events for 50 entities, posted through every
// node, are anchored exactly once — the chain verifies on the node, every transaction the
// node mined is on the chain (no orphan, no fork), every repeat answers the same CID, and each
// entity's latest version names its transaction. In both modes: each event a transaction, and
// each a data item in bundles (whose wrappers are then the transactions mined).
func TestChainSurvivesKill(t *testing.T) {
	for _, mode := range []string{chain.ModeL1, chain.ModeBundle} {
		t.Run(mode, func(t *testing.T) { chainSurvivesKill(t, mode) })
	}
}

func chainSurvivesKill(t *testing.T, mode string) {
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
	hc := &http.Client{Timeout: 5 * time.Second}
	if resp, err := hc.Post(gateway+"/admin/faults", "application/json", strings.NewReader(`{"DropAfterAccept":0.15}`)); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("faults: %v %v", resp, err)
	}

	dir := t.TempDir()
	wallet := arweave.TestWalletJWK(t)
	walletFile := filepath.Join(dir, "wallet.json")
	tokenFile := filepath.Join(dir, "chain.token")
	token := strings.Repeat("c", 40)
	keyFile := filepath.Join(dir, "signer.key") // the items' signer, in bundle mode
	key, _, _, err := chain.NewSignerKey()
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{walletFile: wallet, tokenFile: []byte(token), keyFile: []byte(key)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flags := append(append([]string{}, fastFlags...), "--arweave-gateway", gateway, "--arweave-wallet", walletFile,
		"--chain-token-file", tokenFile, "--chain-max-in-flight", "16", "--chain-poll-interval", "200ms", "--chain-mode", mode)
	if mode == chain.ModeBundle {
		flags = append(flags, "--chain-signer-key", keyFile, "--chain-bundle-interval", "200ms", "--chain-bundle-max-items", "30")
	}
	nodes := proc.StartCluster(t, proc.ClusterConfig{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, N: 3, TLSDir: filepath.Join(dir, "tls"), Flags: flags})
	for _, n := range nodes {
		n.WaitReady(60 * time.Second)
	}
	waitSettled(t, nodes[0])

	// Event i is version i/entities+1 of entity i%entities. Events go to every node in turn;
	// a refused one (the leader dying) is sent again, as a client would.
	const total, entities = 300, 50
	// In bundle mode the manifests are padded, so that a bundle of a few dozen events is
	// larger than a chunk: its data then follows its header, chunk by chunk, and the kills
	// cut uploads too.
	pad := ""
	if mode == chain.ModeBundle {
		pad = strings.Repeat("p", 12000)
	}
	body := func(i int) string {
		return fmt.Sprintf(`{"entity_id":"device-%d","ver":%d,"op":"update","vis":"public","manifest":{"n":%d,"pad":%q}}`, i%entities, i/entities+1, i, pad)
	}
	post := func(i, attempt int) (int, string, error) {
		req, _ := http.NewRequest("POST", nodes[(i+attempt)%3].URL("/v1/chains/main/events"), strings.NewReader(body(i)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		var a chain.Appended
		err = json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a.CID, err
	}
	var accepted atomic.Int64
	cids := make([]string, total)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := w; i < total; i += 6 {
				for attempt := 0; ; attempt++ {
					code, cid, err := post(i, attempt)
					if err == nil && (code == 201 || code == 200) {
						cids[i] = cid
						accepted.Add(1)
						break
					}
					if attempt > 150 {
						t.Errorf("event %d never accepted: %d %v", i, code, err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	p := actors.PartitionOf(chain.KindName, "main", partitions)
	for _, at := range []int64{total / 3, 2 * total / 3} {
		await.True(t, 60*time.Second, fmt.Sprintf("%d events accepted", at), func() bool { return accepted.Load() >= at })
		victim := leaderOf(t, nodes, p)
		victim.Kill()
		t.Logf("SIGKILL %s, leader of the chain's partition %d, after %d events accepted", victim.Config.NodeID, p, accepted.Load())
		victim.RestartReady()
		waitSettled(t, nodes[0])
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Every repeat answers 200 and the CID of its first answer.
	for i := range total {
		if code, cid, err := post(i, i/3); err != nil || code != 200 || cid != cids[i] {
			t.Fatalf("repeat of event %d: %d %s %v (first answered %s)", i, code, cid, err, cids[i])
		}
	}

	var head chain.Head
	defer func() {
		if t.Failed() {
			logChain(t, hc, nodes[0], gateway, head)
		}
	}()
	await.True(t, 120*time.Second, "every event confirmed", func() bool {
		return getJSON(hc, nodes[0].URL("/v1/chains/main/head"), &head) == nil && head.ConfirmedSeq == total
	})
	// The walk starts at the last event, or at the last bundle's wrapper; it finds any mined
	// transaction of the chain off the walk (an orphan or a fork) through the fake's GraphQL.
	walkFrom := *head.TxID
	if mode == chain.ModeBundle {
		if head.BundleTx == nil {
			t.Fatalf("bundle mode, and the head names no bundle: %+v", head)
		}
		walkFrom = *head.BundleTx
	}
	r := chain.Verify(context.Background(), arweave.NewClient(gateway, nil), walkFrom, nil)
	if !r.OK || r.Checked != total || r.OrphanCheck != "ok" {
		t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
	var mined []string
	if err := getJSON(hc, gateway+"/admin/mined", &mined); err != nil {
		t.Fatal(err)
	}
	onChain := map[string]int64{}
	for seq := int64(1); seq <= total; seq++ {
		var e struct {
			TxID     string `json:"tx_id"`
			EntityID string `json:"entity_id"`
			Ver      int64  `json:"ver"`
		}
		if err := getJSON(hc, nodes[seq%3].URL(fmt.Sprintf("/v1/chains/main/events/%d", seq)), &e); err != nil {
			t.Fatal(err)
		}
		onChain[e.TxID] = seq
		if e.Ver == total/entities {
			var latest struct {
				Ver  int64  `json:"ver"`
				TxID string `json:"tx_id"`
			}
			if err := getJSON(hc, nodes[0].URL("/v1/chains/main/entities/"+e.EntityID), &latest); err != nil || latest.Ver != e.Ver || latest.TxID != e.TxID {
				t.Errorf("entity %s: latest %+v %v, its newest version is in event %d, transaction %s", e.EntityID, latest, err, seq, e.TxID)
			}
		}
	}
	if len(onChain) != total {
		t.Fatalf("%d events name %d distinct transactions or items", total, len(onChain))
	}
	if mode == chain.ModeBundle {
		// The walk passed r.Transactions wrappers, and found no other mined: the fake mined
		// nothing else (it holds no other wallet's).
		if len(mined) != r.Transactions || r.Transactions < 2 {
			t.Fatalf("the node mined %d transactions, the walk passed %d wrappers: an orphan or a fork", len(mined), r.Transactions)
		}
		t.Logf("%d events in %d bundles", total, r.Transactions)
		return
	}
	for _, id := range mined {
		if _, ok := onChain[id]; !ok {
			t.Errorf("the node mined transaction %s, which is not on the chain: an orphan", id)
		}
	}
	if len(mined) != total {
		t.Fatalf("the node mined %d transactions, the chain holds %d distinct ones, for %d events: an orphan or a fork", len(mined), len(onChain), total)
	}
	// The gateway now serves event 150's data changed: the verifier names it.
	var tampered string
	for id, seq := range onChain {
		if seq == 150 {
			tampered = id
		}
	}
	data, err := arweave.NewClient(gateway, nil).Data(context.Background(), tampered)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), `"vis":"public"`, `"vis":"secret"`, 1))
	if resp, err := hc.Post(gateway+"/admin/tamper/"+tampered, "application/octet-stream", strings.NewReader(string(data))); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("tamper: %v %v", resp, err)
	}
	r = chain.Verify(context.Background(), arweave.NewClient(gateway, nil), walkFrom, nil)
	if r.OK || r.FirstError == nil || r.FirstError.Seq != 150 {
		t.Fatalf("verify of the tampered chain: %+v %+v", r, r.FirstError)
	}
	t.Logf("tampered event 150: %s", r.FirstError.Reason)
}

// getJSON decodes the answer of a GET, which must be 200.
func getJSON(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// logChain logs what the node and the gateway say of the chain's unconfirmed events.
func logChain(t *testing.T, hc *http.Client, n *proc.Node, gateway string, head chain.Head) {
	t.Logf("head %+v", head)
	for seq := head.ConfirmedSeq + 1; seq <= head.Seq && seq <= head.ConfirmedSeq+5; seq++ {
		var e struct {
			TxID   string `json:"tx_id"`
			Status string `json:"status"`
		}
		if getJSON(hc, n.URL(fmt.Sprintf("/v1/chains/main/events/%d", seq)), &e) != nil {
			continue
		}
		var st json.RawMessage
		err := getJSON(hc, gateway+"/tx/"+e.TxID+"/status", &st)
		t.Logf("event %d: %s %s; node: %s %v", seq, e.TxID, e.Status, st, err)
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
