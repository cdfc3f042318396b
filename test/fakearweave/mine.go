package fakearweave

import (
	"slices"
	"time"
)

func (f *Fake) mineEvery(d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			f.Mine()
		}
	}
}

// Mine mines one block, as a node packs one:
//
//   - A transaction whose anchor is no longer among the last AnchorDepth blocks (up to the
//     current tip, which the new block builds on) can never be mined: it is dropped from the
//     mempool, as a node's mempool filter drops it.
//   - The others are taken by priority: the highest reward first (a node's utility of a
//     format-2 transaction), equal rewards in the order taken; at most MaxBlockTxs of them
//     (BLOCK_TX_COUNT_LIMIT). The rest wait for later blocks, in the order taken.
//   - The EvictFromMempool fault drops a transaction when its turn comes instead of mining it.
//
// No cap on bytes: Arweave's block data limit (BLOCK_TX_DATA_SIZE_LIMIT) counts only the data
// of format-1 transactions, which carry it inside the block; format-2 data (the only format
// this node takes) travels as chunks, outside blocks.
func (f *Fake) Mine() {
	f.mu.Lock()
	defer f.mu.Unlock()
	height := len(f.blocks)
	var ready []string
	for _, id := range f.mempool {
		if f.recentBlock(f.txs[id].tx.LastTx) {
			ready = append(ready, id)
		} else {
			f.drop(id)
		}
	}
	slices.SortStableFunc(ready, func(a, b string) int {
		ea, eb := f.txs[a], f.txs[b]
		if c := eb.reward.Cmp(ea.reward); c != 0 {
			return c
		}
		return ea.seq - eb.seq
	})
	var txs []string
	for _, id := range ready {
		if len(txs) == f.cfg.MaxBlockTxs {
			break
		}
		if f.dice.Float64() < f.faults.EvictFromMempool {
			f.drop(id)
			continue
		}
		e := f.txs[id]
		e.height, e.index = height, len(txs)
		txs = append(txs, id)
	}
	waiting := f.mempool[:0]
	for _, id := range f.mempool {
		if e, ok := f.txs[id]; ok && e.height < 0 {
			waiting = append(waiting, id)
		}
	}
	clear(f.mempool[len(waiting):])
	f.mempool = waiting
	f.mined = append(f.mined, txs...)
	f.blocks = append(f.blocks, block{hash: randomHash(), at: time.Now(), txs: txs})
}

// recentBlock reports whether anchor is one of the last AnchorDepth blocks, the anchors a
// transaction posted now or mined in the next block may name. Caller holds mu.
func (f *Fake) recentBlock(anchor []byte) bool {
	for i := len(f.blocks) - 1; i >= 0 && i >= len(f.blocks)-f.cfg.AnchorDepth; i-- {
		if string(f.blocks[i].hash) == string(anchor) {
			return true
		}
	}
	return false
}
