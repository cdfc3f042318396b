package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/cid"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// Figures of TestChainExactlyOnce.
const (
	chainEntities = 40
	chainVersions = 5 // per entity: 200 events
	chainWorkers  = 12
	chainName     = "ledger" // partition 3: the upper half of group 0, which the first split moves
	chainToken    = "chaos-chain-token-0123456789abcdef-0123"
)

// TestChainExactlyOnce: 200 events (40 entities × 5 versions) appended concurrently through
// every node of a three-node cluster to one chain anchoring on a fake Arweave node that drops
// 20 % of its answers after taking a transaction, refuses 5 % of the posts with 429 and
// evicts 5 % of the transactions from its mempool. Meanwhile the node leading the chain is
// SIGKILLed twice while uploads are under way (between a post and the head's update) and
// restarted on its data. Some appends are repeated with another body (409) and versions are
// read. Then: the clients' history is linearizable under ChainModel; the chain verifies on
// the fake (seq 1..200 without gap or duplicate, every link and CID right); every transaction
// the fake mined is on the chain (no orphan, no fork); every accepted version is on it
// exactly once, and the version index, the entities' latest pointers and the head agree with
// the chain. In grow-shrink, instead of the kills, two nodes join while uploads are under
// way, which splits the Raft group holding the chain (its partition moves to the new group),
// and leave again (SIGTERM) before the end, after which the groups merge back to one per
// node while the last uploads go on. The -bundle variants run the same with the events as
// data items in bundles: the faults then strike the wrappers, the fake mines wrappers only,
// and each one it mined must be on the walk.
func TestChainExactlyOnce(t *testing.T) {
	for _, ctl := range []struct {
		name  string
		short bool
		mode  string
		run   func(c *cluster, h *chainHistory, at func(n int), p uint32)
	}{
		{"kill-leader", true, chain.ModeL1, killChainLeader},
		{"kill-leader-bundle", true, chain.ModeBundle, killChainLeader},
		{"grow-shrink", false, chain.ModeL1, growUnderChain},
		{"grow-shrink-bundle", false, chain.ModeBundle, growUnderChain},
	} {
		t.Run(ctl.name, func(t *testing.T) {
			if testing.Short() && !ctl.short {
				t.Skip("not part of the -short subset (make chaos runs it)")
			}
			runChainScenario(t, ctl.mode, ctl.run)
		})
	}
}

// killChainLeader SIGKILLs the chain's leader twice while uploads are under way, each time
// restarting it on its data once the survivors answer.
func killChainLeader(c *cluster, h *chainHistory, at func(n int), p uint32) {
	total := chainEntities * chainVersions
	for _, n := range []int{total / 4, total * 2 / 3} {
		at(n)
		leader := c.leaderOf(p)
		v := c.nodeIndex(leader)
		if v < 0 {
			c.t.Errorf("no leader known for the chain's partition %d", p)
			return
		}
		c.note("SIGKILL %s, leader of the chain's partition %d, uploads under way (%d appends answered)", leader, p, h.posted())
		c.nodes[v].Kill()
		at(n + 25)
		c.nodes[v].Restart()
		c.nodes[v].WaitReady(60 * time.Second)
		c.note("%s restarted on its data and ready", leader)
		c.waitLeaders(30 * time.Second)
	}
}

// growUnderChain joins two nodes while uploads are under way, which splits the group
// holding the chain's partition, and stops them again before the end.
func growUnderChain(c *cluster, h *chainHistory, at func(n int), p uint32) {
	total := chainEntities * chainVersions
	at(total / 4)
	before := c.groupOf(p)
	var extra []*proc.Node
	for i, ip := range growIPs {
		extra = append(extra, c.join("n"+strconv.Itoa(clusterSize+1+i), ip, graceFlags))
	}
	all := append(slices.Clone(c.nodes), extra...)
	for _, n := range extra {
		n.WaitReady(60 * time.Second)
	}
	c.awaitView(all[0], time.Now().Add(90*time.Second), "the chain's partition in a group of its own", func(v clusterView) string {
		if g := v.Partitions[p].Group; g == before {
			return fmt.Sprintf("partition %d still in group %#x", p, g)
		}
		return ""
	})
	c.note("the chain's partition %d moved from group %#x to %#x (%d appends answered)", p, before, c.groupOf(p), h.posted())
	c.waitPlaced(all, 90*time.Second)
	at(total * 2 / 3)
	for i := len(extra) - 1; i >= 0; i-- {
		if code := extra[i].Term(); code != 0 {
			c.t.Errorf("%s exited %d after SIGTERM, want 0", extra[i].Config.NodeID, code)
		}
		c.note("%s stopped (%d appends answered)", extra[i].Config.NodeID, h.posted())
	}
	c.waitPlaced(c.nodes, deadGrace+30*time.Second)
	c.awaitGroupPerNode(c.nodes, 2*time.Minute, true)
	c.note("merged back to one group per node; the chain's partition is in group %#x (%d appends answered)", c.groupOf(p), h.posted())
}

// runChainScenario runs control against a chain in mode (chain.ModeL1 or chain.ModeBundle:
// then each event is a data item, and the transactions the fake mines are bundles' wrappers).
func runChainScenario(t *testing.T, mode string, control func(c *cluster, h *chainHistory, at func(n int), p uint32)) {
	const seed = 1
	fake := fakearweave.New(fakearweave.Config{BlockInterval: 100 * time.Millisecond, Seed: seed})
	gw := httptest.NewServer(fake)
	t.Cleanup(func() { gw.Close(); fake.Close() })
	fake.SetFaults(fakearweave.Faults{Latency: 5 * time.Millisecond, DropAfterAccept: 0.2, TooMany: 0.05, EvictFromMempool: 0.05})
	dir := t.TempDir()
	wallet, token := filepath.Join(dir, "wallet.json"), filepath.Join(dir, "chain-token")
	keyFile := filepath.Join(dir, "signer.key") // the items' signer, in bundle mode
	key, _, _, err := chain.NewSignerKey()
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{wallet: arweave.TestWalletJWK(t), token: []byte(chainToken), keyFile: []byte(key)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--arweave-gateway", gw.URL, "--arweave-wallet", wallet, "--chain-token-file", token,
		"--chain-max-in-flight", "16", "--chain-poll-interval", "200ms", "--merge-delay", "2s", "--chain-mode", mode}
	if mode == chain.ModeBundle {
		flags = append(flags, "--chain-signer-key", keyFile, "--chain-bundle-interval", "300ms", "--chain-bundle-max-items", "8")
	}
	c := startClusterBinding(t, false, flags...)
	h := newChainHistory(c)
	total := chainEntities * chainVersions

	prog := newProgress()
	var acked, done int // appends answered, workers finished
	waitFor := func(what string, timeout time.Duration, ok func() bool) { prog.WaitFor(t, what, timeout, ok) }
	p := actors.PartitionOf(chain.KindName, chainName, partitions)
	var ctl sync.WaitGroup
	ctl.Go(func() {
		control(c, h, func(n int) {
			waitFor("control point", 90*time.Second, func() bool { return acked >= n || done == chainWorkers })
		}, p)
	})

	var next sync.Mutex
	nextIdx := 0
	var wg sync.WaitGroup
	for w := range chainWorkers {
		cs := &chainClient{id: h.ids.New(), next: w, rnd: rand.New(rand.NewPCG(seed, uint64(w)))}
		wg.Go(func() {
			defer prog.Update(func() { done++ })
			for {
				next.Lock()
				i := nextIdx
				nextIdx++
				next.Unlock()
				if i >= total {
					return
				}
				key := chainKey{entity: fmt.Sprintf("device-%d", i%chainEntities), ver: int64(i/chainEntities + 1)}
				if !h.appendUntilAnswered(cs, key, "a", time.Now().Add(90*time.Second)) {
					t.Errorf("append %s: no answer within 90 s", key)
					continue
				}
				prog.Update(func() { acked++ })
				if cs.rnd.Float64() < 0.15 { // the same version with another body
					h.append(cs, key, "b")
				}
				if cs.rnd.Float64() < 0.3 {
					h.version(cs, key)
				}
				time.Sleep(time.Duration(20+cs.rnd.IntN(60)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	ctl.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Every event confirmed, the queue empty.
	var head chain.Head
	deadline := time.Now().Add(120 * time.Second)
	for {
		err := c.getJSON(c.nodes[0], "/v1/chains/"+chainName+"/head", &head)
		if err == nil && head.ConfirmedSeq == int64(total) && head.Seq == int64(total) && head.Queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every event confirmed within 120 s: head %+v (%v)", head, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.note("all %d events confirmed", total)

	// Every version read once more (into the history): each shows its seq.
	cs := &chainClient{id: h.ids.New(), rnd: rand.New(rand.NewPCG(seed, 999))}
	seqOf := map[chainKey]int64{}
	txOf := map[chainKey]string{}
	for i := range total {
		key := chainKey{entity: fmt.Sprintf("device-%d", i%chainEntities), ver: int64(i/chainEntities + 1)}
		a := h.version(cs, key)
		if a.status != 200 || a.Seq == 0 || a.Status != chain.StatusConfirmed {
			t.Errorf("version %s after settling: %d %+v", key, a.status, a)
			continue
		}
		seqOf[key], txOf[key] = a.Seq, a.TxID
	}
	c.checkHistory("chain", ChainModel, h.rec.Ops())

	// The chain on the fake: whole, 1..total, no mined transaction of its off the walk (the
	// verifier lists them through the fake's GraphQL).
	walkFrom := *head.TxID
	if mode == chain.ModeBundle {
		if head.BundleTx == nil {
			t.Fatalf("bundle mode, and the head names no bundle: %+v", head)
		}
		walkFrom = *head.BundleTx
	}
	r := chain.Verify(context.Background(), arweave.NewClient(gw.URL, nil), walkFrom, nil)
	if !r.OK || r.Checked != total || r.OrphanCheck != "ok" {
		t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
	// Each event is one accepted version, the one the index names; no transaction the fake
	// mined is off the chain.
	onChain := map[string]int64{}
	versionAt := map[int64]chainKey{}
	for seq := int64(1); seq <= int64(total); seq++ {
		var e struct {
			EntityID string `json:"entity_id"`
			Ver      int64  `json:"ver"`
			TxID     string `json:"tx_id"`
			Status   string `json:"status"`
		}
		if err := c.getJSON(c.nodes[int(seq)%len(c.nodes)], fmt.Sprintf("/v1/chains/%s/events/%d", chainName, seq), &e); err != nil {
			t.Fatal(err)
		}
		key := chainKey{e.EntityID, e.Ver}
		if prev, dup := seqOfKey(versionAt, key); dup {
			t.Errorf("version %s is event %d and event %d", key, prev, seq)
		}
		versionAt[seq] = key
		onChain[e.TxID] = seq
		if seqOf[key] != seq || txOf[key] != e.TxID || e.Status != chain.StatusConfirmed {
			t.Errorf("event %d is %s (%s, %s); its version says seq %d, tx %s", seq, key, e.TxID, e.Status, seqOf[key], txOf[key])
		}
	}
	mined := fake.Mined()
	switch {
	case len(onChain) != total:
		t.Errorf("%d events name %d distinct transactions or items", total, len(onChain))
	case mode == chain.ModeBundle:
		// Every event in the bundles walked; the fake mined those wrappers and no other.
		if len(mined) != r.Transactions {
			t.Errorf("the fake mined %d transactions, the walk passed %d wrappers: an orphan or a fork", len(mined), r.Transactions)
		}
		c.note("%d events in %d bundles", total, r.Transactions)
	default:
		for _, id := range mined {
			if _, ok := onChain[id]; !ok {
				t.Errorf("the fake mined transaction %s, which is not on the chain: an orphan", id)
			}
		}
		if len(mined) != total {
			t.Errorf("the fake mined %d transactions, the chain holds %d distinct ones, for %d events", len(mined), len(onChain), total)
		}
	}
	for e := range chainEntities {
		newest := chainKey{fmt.Sprintf("device-%d", e), chainVersions}
		var latest struct {
			Ver  int64  `json:"ver"`
			TxID string `json:"tx_id"`
			Seq  int64  `json:"seq"`
		}
		if err := c.getJSON(c.nodes[e%len(c.nodes)], "/v1/chains/"+chainName+"/entities/"+newest.entity, &latest); err != nil ||
			latest.Ver != newest.ver || latest.TxID != txOf[newest] || latest.Seq != seqOf[newest] {
			t.Errorf("entity %s: latest %+v (%v); its newest version is event %d, tx %s", newest.entity, latest, err, seqOf[newest], txOf[newest])
		}
	}
	if last := versionAt[int64(total)]; *head.TxID != txOf[last] {
		t.Errorf("head tx %s, event %d's is %s", *head.TxID, total, txOf[last])
	}
	t.Logf("appends: %s", h.summary())
}

func seqOfKey(at map[int64]chainKey, key chainKey) (int64, bool) {
	for seq, k := range at {
		if k == key {
			return seq, true
		}
	}
	return 0, false
}

// chainKey is one version of an entity.
type chainKey struct {
	entity string
	ver    int64
}

func (k chainKey) String() string { return fmt.Sprintf("%s/%d", k.entity, k.ver) }

// chainHistory sends the chain's requests, one attempt each, and records them.
type chainHistory struct {
	c    *cluster
	hc   *http.Client
	rec  *Recorder
	ids  ClientIDs
	cids map[string]string // manifest CID → the body's name ("a" or "b")

	mu    sync.Mutex
	stats map[string]int
}

func newChainHistory(c *cluster) *chainHistory {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	c.t.Cleanup(tr.CloseIdleConnections)
	return &chainHistory{c: c, hc: &http.Client{Transport: tr}, rec: NewRecorder(c.start), cids: map[string]string{}, stats: map[string]int{}}
}

// chainClient is one client goroutine: its porcupine id (renewed after an unknown outcome),
// its place in the round robin and its randomness.
type chainClient struct {
	id   int
	next int
	rnd  *rand.Rand
}

// body is the body named content ("a" or "b": another manifest) of version k.
func (h *chainHistory) body(k chainKey, content string) []byte {
	manifest := fmt.Sprintf(`{"entity":%q,"ver":%d,"body":%q}`, k.entity, k.ver, content)
	_, id, _ := cid.OfJSON([]byte(manifest))
	h.mu.Lock()
	h.cids[id] = content
	h.mu.Unlock()
	return fmt.Appendf(nil, `{"entity_id":%q,"ver":%d,"op":"update","vis":"public","manifest":%s}`, k.entity, k.ver, manifest)
}

// chainAnswer is one attempt's answer.
type chainAnswer struct {
	status int // 0: no answer
	code   string
	Seq    int64  `json:"seq"`
	CID    string `json:"cid"`
	TxID   string `json:"tx_id"`
	Status string `json:"status"`
}

// do sends one attempt to the next node and records it as op on key.
func (h *chainHistory) do(cs *chainClient, op string, key chainKey, content, method, path string, body []byte) chainAnswer {
	n := h.c.nodes[cs.next%len(h.c.nodes)]
	cs.next++
	in := Input{Op: op, Key: key.String(), Content: content, Node: n.Config.NodeID}
	call := h.rec.Now()
	a, sent := h.send(n, method, path, body)
	ret := h.rec.Now()
	if !sent {
		return a // never reached the node: no effect, not in the history
	}
	out := Output{Status: a.status, Code: a.code}
	switch {
	case a.status == 0 || a.status >= 500:
		out.Unknown = true
	case a.status == 200 || a.status == 201:
		h.mu.Lock()
		out.Content = h.cids[a.CID]
		h.mu.Unlock()
		if out.Content == "" {
			out.Content = "cid " + a.CID
		}
		out.Seq = a.Seq
	}
	h.rec.Add(cs.id, in, call, ret, out)
	if out.Unknown {
		cs.id = h.ids.New()
	}
	h.mu.Lock()
	h.stats[op+" "+out.String()]++
	h.mu.Unlock()
	return a
}

// send sends one request; sent is false when the connection could not be made.
func (h *chainHistory) send(n *proc.Node, method, path string, body []byte) (a chainAnswer, sent bool) {
	if !n.Running() {
		return a, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, n.URL(path), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+chainToken)
	resp, err := h.hc.Do(req)
	if err != nil {
		return a, !isDialError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, true
	}
	a.status = resp.StatusCode
	if a.status == 200 || a.status == 201 {
		if json.Unmarshal(b, &a) != nil {
			a.status = 0
		}
		return a, true
	}
	var e struct {
		Code string `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	a.code = e.Code
	return a, true
}

// append POSTs body content of version k once.
func (h *chainHistory) append(cs *chainClient, k chainKey, content string) chainAnswer {
	return h.do(cs, OpAppend, k, content, http.MethodPost, "/v1/chains/"+chainName+"/events", h.body(k, content))
}

// appendUntilAnswered POSTs body content of version k until a definite answer (201 or 200),
// through the next node each time, until deadline.
func (h *chainHistory) appendUntilAnswered(cs *chainClient, k chainKey, content string, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		a := h.append(cs, k, content)
		if a.status == 200 || a.status == 201 {
			return true
		}
		if a.status >= 400 && a.status < 500 {
			h.c.t.Errorf("append %s: %d %s", k, a.status, a.code)
			return false
		}
		time.Sleep(time.Duration(50+cs.rnd.IntN(100)) * time.Millisecond)
	}
	return false
}

// version GETs version k once.
func (h *chainHistory) version(cs *chainClient, k chainKey) chainAnswer {
	return h.do(cs, OpVersion, k, "", http.MethodGet, fmt.Sprintf("/v1/chains/%s/entities/%s/versions/%d", chainName, k.entity, k.ver), nil)
}

// posted counts the appends answered so far.
func (h *chainHistory) posted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for k, v := range h.stats {
		if len(k) > len(OpAppend) && k[:len(OpAppend)] == OpAppend {
			n += v
		}
	}
	return n
}

func (h *chainHistory) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.stats)
}
