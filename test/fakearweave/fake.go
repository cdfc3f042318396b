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
	// BlockInterval is how often a block is mined (default 100ms); 0 with Manual: only Mine.
	BlockInterval time.Duration
	Manual        bool
	// AnchorDepth is how many recent blocks a last_tx may name (default 50, as Arweave).
	AnchorDepth int
	// BasePrice and PricePerChunk make GET /price/{bytes}: BasePrice + PricePerChunk·chunks
	// (winston), the data counted in whole 256 KiB chunks as the network prices it.
	PricePerChunk, BasePrice int64
	Seed                     uint64 // of the fault dice
}

// Faults are the failures the fake injects, each a probability in [0, 1].
type Faults struct {
	Latency time.Duration // added to every answer
	// DropAfterAccept: POST /tx takes the transaction, then drops the connection unanswered.
	DropAfterAccept float64
	// TooMany and Unavailable answer POST /tx 429 or 503 without taking it.
	TooMany, Unavailable float64
	// EvictFromMempool: a transaction taken is dropped from the mempool before mining (as a
	// node does under pressure); its status becomes 404, and posting it again is accepted.
	EvictFromMempool float64
}

// Fake is the fake node. Safe for concurrent use.
type Fake struct {
	cfg  Config
	mux  *http.ServeMux
	stop chan struct{}
	once sync.Once

	mu      sync.Mutex
	faults  Faults
	dice    *mrand.Rand
	blocks  [][]byte           // indep hashes, by height
	txs     map[string]*entry  // every transaction taken and not evicted
	mempool []string           // ids taken, not mined, in order
	chunks  map[string]*upload // data root → data arriving by chunks
	mined   []string           // ids in the order they were mined
	taken   []Taken            // every POST /tx taken, in order
}

// Taken is a transaction the node took from a POST /tx (a repeat answered 208 is not).
type Taken struct {
	ID   string
	Tags []arweave.Tag
	At   time.Time
}

type entry struct {
	tx     *arweave.Tx
	height int // mined at; -1 while in the mempool
	data   []byte
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
	if cfg.PricePerChunk == 0 && cfg.BasePrice == 0 {
		cfg.PricePerChunk, cfg.BasePrice = 262144000, 100000
	}
	f := &Fake{cfg: cfg, stop: make(chan struct{}), dice: mrand.New(mrand.NewPCG(cfg.Seed, 1)),
		txs: map[string]*entry{}, chunks: map[string]*upload{}}
	f.blocks = append(f.blocks, randomHash())
	f.routes()
	if !cfg.Manual {
		go f.mineEvery(cfg.BlockInterval)
	}
	return f
}

// ServeHTTP serves the node's API and /admin.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Close stops mining.
func (f *Fake) Close() { f.once.Do(func() { close(f.stop) }) }

// SetFaults replaces the faults injected.
func (f *Fake) SetFaults(fs Faults) {
	f.mu.Lock()
	f.faults = fs
	f.mu.Unlock()
}

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

// Mine mines one block holding the mempool, less what the EvictFromMempool fault drops and
// the transactions whose anchor expired.
func (f *Fake) Mine() {
	f.mu.Lock()
	defer f.mu.Unlock()
	height := len(f.blocks)
	f.blocks = append(f.blocks, randomHash())
	for _, id := range f.mempool {
		e := f.txs[id]
		// Evicted by the fault, or its anchor no longer among the last AnchorDepth blocks: a
		// node never mines such a transaction, and drops it.
		if f.dice.Float64() < f.faults.EvictFromMempool || !f.recentBlock(e.tx.LastTx) {
			delete(f.txs, id)
			continue
		}
		e.height = height
		f.mined = append(f.mined, id)
	}
	f.mempool = nil
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
// gateway would; it reports whether the node has the transaction.
func (f *Fake) Tamper(id string, data []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.txs[id]
	if ok {
		e.data = data
	}
	return ok
}

// Mined returns the ids of the mined transactions, in mining order.
func (f *Fake) Mined() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.mined...)
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
