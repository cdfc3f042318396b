package fakearweave

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Reorg replaces the last depth blocks (at most every block above genesis) by as many new,
// empty blocks with new hashes: the height stays, and it returns the ids of the transactions
// the replaced blocks held.
//
// Those transactions are dropped entirely, neither mined nor in the mempool: their status is
// 404, as on a gateway whose node switched to a fork that does not hold them and did not see
// them again. (A node that had them puts them back into its mempool when their anchors allow;
// the fake models the worse case, where only the client's posting the same bytes again gets
// them mined, and that post is taken as new.) Whatever names a replaced block goes with it:
// a mempool transaction anchored on one is dropped, as a node's mempool filter drops it after
// a fork switch, and a POST /tx anchored on one is refused (Invalid anchor). Bundles in the
// replaced blocks are no longer indexed: their items answer 404 until a bundle holding them
// is mined again.
//
// Blocks below the fork keep their hashes and transactions; confirmations keep counting from
// the height, which the reorg does not change.
func (f *Fake) Reorg(depth int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	depth = min(depth, len(f.blocks)-1)
	if depth <= 0 {
		return nil
	}
	fork := len(f.blocks) - depth
	var dropped []string
	now := time.Now()
	for h := fork; h < len(f.blocks); h++ {
		for _, id := range f.blocks[h].txs {
			f.drop(id)
			dropped = append(dropped, id)
		}
		f.blocks[h] = block{hash: randomHash(), at: now}
	}
	// The dropped transactions are the last ones mined.
	f.mined = f.mined[:len(f.mined)-len(dropped)]
	f.mempool = slices.DeleteFunc(f.mempool, func(id string) bool {
		if f.recentBlock(f.txs[id].tx.LastTx) {
			return false
		}
		f.drop(id)
		return true
	})
	return dropped
}

// adminReorg is POST /admin/reorg?depth=N: {"height", "dropped": [ids]}.
func (f *Fake) adminReorg(w http.ResponseWriter, r *http.Request) {
	depth, err := strconv.Atoi(r.URL.Query().Get("depth"))
	if h := f.Height(); err != nil || depth < 1 || depth > h {
		http.Error(w, "depth must be a number of blocks from 1 to the height, "+strconv.Itoa(h), http.StatusBadRequest)
		return
	}
	dropped := f.Reorg(depth)
	if dropped == nil {
		dropped = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"height": f.Height(), "dropped": dropped})
}
