package fakearweave

import (
	"crypto/rand"
	"encoding/base64"
	"math/big"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// Config configures a Fake.
type Config struct {
	// BlockInterval is how often a block is mined (default 100ms; Arweave's is about two
	// minutes, which works too: every answer but a status change comes at once); 0 with
	// Manual: only Mine.
	BlockInterval time.Duration
	Manual        bool
	// AnchorDepth is how many recent blocks a last_tx may name (default 50, as Arweave).
	AnchorDepth int
	// SuggestedAnchorDepth is which recent block GET /tx_anchor names: 1 (the default) the
	// tip, n the nth newest. A node names its SUGGESTED_TX_ANCHOR_DEPTH-th (6), so that a
	// reorg shallower than that leaves the anchors it handed out valid.
	SuggestedAnchorDepth int
	// MaxBlockTxs is how many transactions a block holds at most (default 1000, Arweave's
	// BLOCK_TX_COUNT_LIMIT); the rest wait in the mempool for later blocks.
	MaxBlockTxs int
	// BasePrice and PricePerChunk make GET /price/{bytes}: BasePrice + PricePerChunk·chunks
	// (winston), the data counted in whole 256 KiB chunks as the network prices it.
	PricePerChunk, BasePrice int64
	Seed                     uint64 // of the fault dice
}

// Faults are the failures the fake injects, each a probability in [0, 1].
type Faults struct {
	// Latency is added to every answer of the node's and the gateway's API (not /admin).
	// Requests wait it out concurrently, holding nothing, and stop waiting when the client
	// goes away.
	Latency time.Duration
	// DropAfterAccept: POST /tx takes the transaction, then drops the connection unanswered.
	DropAfterAccept float64
	// TooMany and Unavailable answer POST /tx 429 or 503 without taking it.
	TooMany, Unavailable float64
	// EvictFromMempool: a transaction taken is dropped from the mempool before mining (as a
	// node does under pressure); its status becomes 404, and posting it again is accepted.
	EvictFromMempool float64
}

// Fake is the fake node. Safe for concurrent use.
//
// Invariants, under mu:
//   - blocks[0] is the genesis block, never replaced; blocks[h].txs are exactly the entries
//     whose height is h, each at its index, and mined lists the same ids block after block.
//   - txs holds every transaction taken and not dropped since (evicted, expired, or in a
//     block a reorg replaced); an entry is in the mempool (height -1, its id in mempool, in
//     the order taken) or in exactly one block.
//   - items maps a data item id to the ids of the bundles in txs whose data, parsed and every
//     item verified, holds it; a bundle dropped from txs is dropped from items.
type Fake struct {
	cfg  Config
	mux  *http.ServeMux
	stop chan struct{}
	once sync.Once

	mu      sync.Mutex
	faults  Faults
	dice    *mrand.Rand
	blocks  []block
	txs     map[string]*entry  // every transaction taken and not dropped
	mempool []string           // ids taken, not mined, in order
	chunks  map[string]*upload // data root → data arriving by chunks
	mined   []string           // ids on the chain, in the order they were mined
	taken   []Taken            // every POST /tx taken, in order
	seq     int                // counts the transactions taken
	items   map[string][]string
}

// Taken is a transaction the node took from a POST /tx (a repeat answered 208 is not).
type Taken struct {
	ID   string
	Tags []arweave.Tag
	At   time.Time
}

type block struct {
	hash []byte
	at   time.Time
	txs  []string // mined in it, in block order
}

type entry struct {
	tx     *arweave.Tx
	height int // mined at; -1 while in the mempool
	index  int // place in its block, once mined
	data   []byte
	reward *big.Int // the mempool's priority (a node's utility of a format-2 transaction)
	seq    int      // order taken: the priority between equal rewards, and GraphQL's pending order
	bundle *bundle  // non-nil when the tags say the data is an ANS-104 bundle
}

type upload struct {
	size int
	data []byte
	got  map[int]bool // chunk offsets received
}

// New starts a fake node (mining unless cfg.Manual). Close stops it.
func New(cfg Config) *Fake {
	if cfg.BlockInterval <= 0 {
		cfg.BlockInterval = 100 * time.Millisecond
	}
	if cfg.AnchorDepth <= 0 {
		cfg.AnchorDepth = 50
	}
	cfg.SuggestedAnchorDepth = min(max(cfg.SuggestedAnchorDepth, 1), cfg.AnchorDepth)
	if cfg.MaxBlockTxs <= 0 {
		cfg.MaxBlockTxs = 1000
	}
	if cfg.PricePerChunk == 0 && cfg.BasePrice == 0 {
		cfg.PricePerChunk, cfg.BasePrice = 262144000, 100000
	}
	f := &Fake{cfg: cfg, stop: make(chan struct{}), dice: mrand.New(mrand.NewPCG(cfg.Seed, 1)),
		txs: map[string]*entry{}, chunks: map[string]*upload{}, items: map[string][]string{}}
	f.blocks = append(f.blocks, block{hash: randomHash(), at: time.Now()})
	f.routes()
	if !cfg.Manual {
		go f.mineEvery(cfg.BlockInterval)
	}
	return f
}

// ServeHTTP serves the node's API, the gateway's (data items, GraphQL) and /admin.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Close stops mining.
func (f *Fake) Close() { f.once.Do(func() { close(f.stop) }) }

// SetFaults replaces the faults injected.
func (f *Fake) SetFaults(fs Faults) {
	f.mu.Lock()
	f.faults = fs
	f.mu.Unlock()
}

// Height is the current block height.
func (f *Fake) Height() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.blocks) - 1
}

// TakenSince returns the transactions taken after the first i, in order.
func (f *Fake) TakenSince(i int) []Taken {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.taken) {
		return nil
	}
	return append([]Taken(nil), f.taken[i:]...)
}

// Tamper makes the node serve data instead of transaction id's own, as a faulty or hostile
// gateway would; it reports whether the node has the transaction. The items indexed from a
// bundle's data stay as they were.
func (f *Fake) Tamper(id string, data []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.txs[id]
	if ok {
		e.data = data
	}
	return ok
}

// Mined returns the ids of the transactions on the chain, in mining order (a reorg takes
// those of the blocks it replaced out).
func (f *Fake) Mined() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.mined...)
}

// drop forgets transaction id (evicted, expired, or in a replaced block), and the items its
// bundle held. Caller holds mu; the caller also takes id out of mempool, a block or mined.
func (f *Fake) drop(id string) {
	e, ok := f.txs[id]
	if !ok {
		return
	}
	delete(f.txs, id)
	if e.bundle != nil {
		f.unindex(id, e.bundle)
	}
}

// price is the reward a transaction of size bytes needs.
func (f *Fake) price(size int) *big.Int {
	return big.NewInt(f.cfg.BasePrice + f.cfg.PricePerChunk*int64(arweave.PricedChunks(size)))
}

func randomHash() []byte {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	return b
}

var b64 = base64.RawURLEncoding
