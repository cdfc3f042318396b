package relayer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// fakeChain is an in-memory NEAR behind the RPC seam: one account's access keys with their
// nonces, blocks by height, and transactions that land at once when sent in order. Tests
// inject faults per send (lose the answer, drop the transaction) and hold sends at a gate.
type fakeChain struct {
	mu      sync.Mutex
	height  uint64
	window  uint64                    // validity period in blocks
	nonces  map[near.PublicKey]uint64 // access key nonces
	landed  map[near.Hash]landedTx
	sends   map[near.Hash][][]byte // every send's bytes, by hash
	arrived []uint64               // nonces of sends in arrival order
	refusal map[string]near.InvalidTx
	invalid int // InvalidNonce refusals given

	// fault, when set, decides what happens to a send: it runs under mu.
	fault func(tx *near.SignedTransaction, hash near.Hash) sendFault
	// gate, when set, holds every send after it arrived until it yields (or ctx ends).
	gate    chan struct{}
	waiting int // sends held at the gate
}

type sendFault int

const (
	deliver       sendFault = iota
	landLoseReply           // the transaction lands, the answer is lost
	dropLoseReply           // the node drops it and the answer is lost
)

func newFakeChain() *fakeChain {
	return &fakeChain{height: 1000, window: 100, nonces: map[near.PublicKey]uint64{},
		landed: map[near.Hash]landedTx{}, sends: map[near.Hash][][]byte{}, refusal: map[string]near.InvalidTx{}}
}

type landedTx struct {
	nonce  uint64
	status json.RawMessage
}

func blockHash(h uint64) near.Hash {
	return sha256.Sum256(binary.BigEndian.AppendUint64([]byte("block"), h))
}

func (f *fakeChain) heightOf(h near.Hash) (uint64, bool) {
	for x := f.height; x+f.window+50 >= f.height && x > 0; x-- {
		if blockHash(x) == h {
			return x, true
		}
	}
	return 0, false
}

func (f *fakeChain) advance(blocks uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.height += blocks
}

func (f *fakeChain) setNonce(pk near.PublicKey, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nonces[pk] = n
}

func (f *fakeChain) Block(ctx context.Context, _ near.Finality) (near.BlockRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return near.BlockRef{Height: f.height, Hash: blockHash(f.height)}, nil
}

func (f *fakeChain) ViewAccessKey(ctx context.Context, _ string, pk near.PublicKey, _ near.Finality) (near.AccessKeyView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nonces[pk]
	if !ok {
		return near.AccessKeyView{}, &near.UnknownAccessKeyError{PublicKey: pk.String()}
	}
	return near.AccessKeyView{Nonce: n, BlockHeight: f.height, BlockHash: blockHash(f.height)}, nil
}

var errLost = fmt.Errorf("connection reset: %w", near.ErrOutcomeUnknown)

func (f *fakeChain) SendTx(ctx context.Context, raw []byte, _ near.TxExecutionStatus) (*near.TxOutcome, error) {
	// Network latency, so that sends not kept in order arrive out of order.
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	stx, err := near.DecodeSignedTransaction(raw)
	if err != nil {
		return nil, fmt.Errorf("fake chain: %w", err)
	}
	hash, err := stx.Verify()
	if err != nil {
		return nil, &near.InvalidSignatureError{}
	}
	f.mu.Lock()
	f.sends[hash] = append(f.sends[hash], append([]byte(nil), raw...))
	f.arrived = append(f.arrived, stx.Transaction.Nonce)
	f.mu.Unlock()
	if f.gate != nil {
		f.mu.Lock()
		f.waiting++
		f.mu.Unlock()
		select {
		case <-f.gate:
		case <-ctx.Done():
		}
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("fake chain: %w (%w)", ctx.Err(), near.ErrOutcomeUnknown)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fault := deliver
	if f.fault != nil {
		fault = f.fault(stx, hash)
	}
	if fault == dropLoseReply {
		return nil, errLost
	}
	out, err := f.apply(stx, hash)
	if fault == landLoseReply {
		return nil, errLost
	}
	return out, err
}

// check validates a transaction as a node does before taking it.
func (f *fakeChain) check(tx near.Transaction) error {
	bh, ok := f.heightOf(tx.BlockHash)
	if !ok || f.height-bh > f.window {
		return &near.ExpiredError{}
	}
	if ak := f.nonces[tx.PublicKey]; tx.Nonce <= ak {
		return &near.InvalidNonceError{TxNonce: tx.Nonce, AkNonce: ak}
	}
	if r, ok := f.refusal[tx.ReceiverID]; ok {
		return r
	}
	return nil
}

// apply validates and lands a transaction, as a node does at INCLUDED.
func (f *fakeChain) apply(stx *near.SignedTransaction, hash near.Hash) (*near.TxOutcome, error) {
	tx := stx.Transaction
	if _, ok := f.landed[hash]; ok {
		return &near.TxOutcome{FinalExecutionStatus: near.TxIncluded}, nil
	}
	if err := f.check(tx); err != nil {
		if _, ok := err.(*near.InvalidNonceError); ok {
			f.invalid++
		}
		return nil, err
	}
	f.nonces[tx.PublicKey] = tx.Nonce
	f.landed[hash] = landedTx{nonce: tx.Nonce, status: json.RawMessage(`{"SuccessValue":""}`)}
	return &near.TxOutcome{FinalExecutionStatus: near.TxIncluded}, nil
}

// TxStatus answers a query by signed bytes at NONE, as nearcore does: the outcome of a known
// transaction, else the refusal a check of the bytes finds, else UNKNOWN_TRANSACTION.
func (f *fakeChain) TxStatus(ctx context.Context, q near.TxQuery) (*near.TxOutcome, error) {
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // answers come back in any order
	stx, err := near.DecodeSignedTransaction(q.SignedTx)
	if err != nil {
		return nil, fmt.Errorf("fake chain: status by signed bytes only: %w", err)
	}
	hash, _ := stx.Hash()
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.landed[hash]; ok {
		return &near.TxOutcome{FinalExecutionStatus: near.TxFinal, Status: l.status}, nil
	}
	if err := f.check(stx.Transaction); err != nil {
		return nil, err
	}
	return nil, &near.UnknownTransactionError{Hash: hash.String()}
}

// snapshot returns copies of what the tests assert on.
func (f *fakeChain) sendsOf(h near.Hash) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.sends[h]...)
}

func (f *fakeChain) landedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.landed)
}

func (f *fakeChain) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}
