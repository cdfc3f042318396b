package fakenear

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// chain is the fake's one chain: blocks, state, pool and ledger. Every endpoint serves it.
//
// Invariants (under mu): blocks holds consecutive heights and its last element is the head;
// byHash indexes exactly the blocks in blocks; a transaction hash is in at most one of pool,
// forwards and records (records: landed, for good); changed is closed and replaced after every
// block, so that waiters re-check their condition.
type chain struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	blocks     []*block
	byHash     map[near.Hash]*block
	pool       *pool
	forwards   []forward
	records    map[near.Hash]*txRecord
	ledger     []LedgerEntry
	seq        uint64 // of ledger entries
	foreignSeq uint64
	changed    chan struct{}

	closed    chan struct{}
	closeOnce sync.Once
}

// forward is a transaction a late endpoint holds before it reaches the pool: it is delivered
// when block at is produced.
type forward struct {
	p  *pooledTx
	at uint64
}

func newChain(cfg Config) (*chain, error) {
	genesis := &block{height: cfg.GenesisHeight, time: time.Now(), state: newState()}
	genesis.hash = blockHash(cfg.ChainID, genesis.height, genesis.prev)
	c := &chain{
		cfg: cfg, log: cfg.Logger,
		blocks: []*block{genesis}, byHash: map[near.Hash]*block{genesis.hash: genesis},
		pool: newPool(), records: map[near.Hash]*txRecord{},
		changed: make(chan struct{}), closed: make(chan struct{}),
	}
	for _, a := range cfg.Accounts {
		if err := c.addAccount(a); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *chain) head() *block { return c.blocks[len(c.blocks)-1] }

// final is the last final block: FinalityLag blocks behind the head (the first block while the
// chain is shorter).
func (c *chain) final() *block {
	h := c.head().height
	if h-c.blocks[0].height < c.cfg.FinalityLag {
		return c.blocks[0]
	}
	return c.blockAt(h - c.cfg.FinalityLag)
}

// blockAt returns the retained block at height h, or nil.
func (c *chain) blockAt(h uint64) *block {
	first := c.blocks[0].height
	if h < first || h > c.head().height {
		return nil
	}
	return c.blocks[h-first]
}

// retained is how many blocks are kept: every block a transaction may still name (the validity
// window), with a margin. Older blocks are forgotten, as nodes garbage-collect them; a
// transaction naming one is Expired either way.
func (c *chain) retained() int { return int(c.cfg.ValidityPeriod+c.cfg.FinalityLag) + 16 }

func (c *chain) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *chain) close() { c.closeOnce.Do(func() { close(c.closed) }) }

// produce builds the next block: it delivers the late endpoints' transactions that are due,
// then takes the pool, key by key in nonce order, re-validating each transaction against the
// state the block has built so far (nearcore's prepare_transactions), and applies the valid ones.
func (c *chain) produce() BlockInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.head()
	h := prev.height + 1
	c.deliver(h)
	st := prev.state.clone()
	b := &block{height: h, prev: prev.hash, hash: blockHash(c.cfg.ChainID, h, prev.hash), time: time.Now()}
	resolve := func(p *pooledTx) {
		if k := st.key(p.signed.Transaction.SignerID, p.signed.Transaction.PublicKey); k != nil {
			p.signed.Transaction.Nonce = k.nonce + 1
		}
	}
	for _, group := range c.pool.drain(resolve) {
		for _, p := range group {
			c.include(st, prev, b, p)
		}
	}
	b.state = st
	c.blocks = append(c.blocks, b)
	c.byHash[b.hash] = b
	if n := len(c.blocks) - c.retained(); n > 0 {
		for _, old := range c.blocks[:n] {
			delete(c.byHash, old.hash)
		}
		c.blocks = append([]*block(nil), c.blocks[n:]...)
	}
	c.notify()
	return b.info()
}

// include validates p for block b (built on prev) and applies it to st, or drops it.
func (c *chain) include(st *state, prev, b *block, p *pooledTx) {
	tx := &p.signed.Transaction
	var err *txError
	if !p.foreign {
		err = c.checkPeriod(tx, prev.height)
	}
	var cost *big.Int
	if err == nil {
		cost, err = c.checkState(st, tx, b.height)
	}
	if err != nil {
		c.recordRefusal(Dropped, p.signed, p.hash, p.endpoint, err, b.height)
		return
	}
	charge(st, tx, cost)
	x := &executor{st: st, height: b.height, txHash: p.hash}
	r0 := receipt{
		id: x.nextID(), predecessor: tx.SignerID, receiver: tx.ReceiverID,
		signer: tx.SignerID, signerKey: tx.PublicKey, actions: tx.Actions, deposit: deposits(tx.Actions),
	}
	rec := &txRecord{hash: p.hash, signed: p.signed, height: b.height, blockHash: b.hash, receipts: x.run(r0), foreign: p.foreign}
	c.records[p.hash] = rec
	c.recordLanded(rec, p.endpoint)
}

// deliver moves the late endpoints' transactions due at height h into the pool. nearcore
// validates a forwarded transaction again when it arrives; one that became invalid meanwhile
// (typically: a later nonce of its key landed first) is dropped.
func (c *chain) deliver(h uint64) {
	head := c.head()
	kept := c.forwards[:0]
	for _, f := range c.forwards {
		if f.at > h {
			kept = append(kept, f)
			continue
		}
		if c.records[f.p.hash] != nil || c.pool.has(f.p.hash) {
			continue // another copy got there first
		}
		if err := c.validate(f.p.signed, head); err != nil {
			c.recordRefusal(Dropped, f.p.signed, f.p.hash, f.p.endpoint, err, h)
			continue
		}
		c.pool.add(f.p)
	}
	c.forwards = kept
}

// validate is nearcore's process_tx checks for a transaction received when head is the head.
func (c *chain) validate(signed *near.SignedTransaction, head *block) *txError {
	tx := &signed.Transaction
	if err := c.checkPeriod(tx, head.height); err != nil {
		return err
	}
	if err := c.checkStateless(signed); err != nil {
		return err
	}
	var upper uint64
	if c.cfg.NonceUpperBoundAtRPC {
		upper = head.height + 1
	}
	_, err := c.checkState(head.state, tx, upper)
	return err
}

// submission is a transaction received by an endpoint.
type submission struct {
	signed   *near.SignedTransaction
	hash     near.Hash
	endpoint string
	// forwardDelay: the endpoint hands the transaction to the pool this many blocks late.
	forwardDelay uint64
	// async: wait_until NONE / broadcast_tx_async. nearcore then hands the transaction to its
	// client without the RPC layer's check that an InvalidNonce is a re-send of a transaction
	// that exists, and nobody hears the validation's answer.
	async bool
	// lose (fault): accept, then lose the transaction before it reaches the pool.
	lose bool
	// foreign (fault): a foreign sender of the same key takes this nonce first.
	foreign bool
}

// submit is nearcore's process_tx for a transaction received over RPC. It returns nil when the
// transaction is valid (pooled, already pooled or landed — a re-send is the same transaction —,
// lost, or held by a late endpoint) and the refusal otherwise. Refusals are recorded.
func (c *chain) submit(s submission) *txError {
	c.mu.Lock()
	defer c.mu.Unlock()
	tx := &s.signed.Transaction
	if s.foreign {
		c.addForeign(tx.SignerID, tx.PublicKey, tx.Nonce)
	}
	head := c.head()
	if err := c.validate(s.signed, head); err != nil {
		if !s.async && err.name == "InvalidNonce" && c.records[s.hash] != nil {
			// nearcore's send_tx_internal: an InvalidNonce for a transaction that exists is a
			// re-send of it, answered as valid (the caller then gets its outcome).
			return nil
		}
		c.recordRefusal(Refused, s.signed, s.hash, s.endpoint, err, head.height)
		return err
	}
	if c.records[s.hash] != nil || c.pool.has(s.hash) || c.heldBy(s.hash, s.endpoint) {
		// A duplicate: nothing new happens. (A copy another endpoint holds back does not
		// count: this endpoint, another node, hands its own copy on.)
		return nil
	}
	p := &pooledTx{hash: s.hash, signed: s.signed, endpoint: s.endpoint}
	switch {
	case s.lose:
		c.record(Lost, s.signed, s.hash, s.endpoint, func(e *LedgerEntry) { e.ReasonName = "lost" })
	case s.forwardDelay > 0:
		c.forwards = append(c.forwards, forward{p: p, at: head.height + 1 + s.forwardDelay})
	default:
		c.pool.add(p)
	}
	return nil
}

// checkOnly is the check a status query by signed transaction makes when the node does not
// know the transaction (nearcore's send_tx_internal with check_only): the refusal it would get.
// c.mu is held.
func (c *chain) checkOnly(signed *near.SignedTransaction, hash near.Hash) *txError {
	err := c.validate(signed, c.head())
	if err != nil && err.name == "InvalidNonce" && c.records[hash] != nil {
		return nil
	}
	return err
}

// freshCheck is the check of signed a node makes when it has never seen it: no allowance
// for a re-send of a transaction that landed (the lie fault).
func (c *chain) freshCheck(signed *near.SignedTransaction) *txError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validate(signed, c.head())
}

// forwarding reports whether a late endpoint holds transaction h.
func (c *chain) forwarding(h near.Hash) bool { return c.heldBy(h, "") }

// heldBy reports whether endpoint (any, when "") holds transaction h back from the pool.
func (c *chain) heldBy(h near.Hash, endpoint string) bool {
	for _, f := range c.forwards {
		if f.p.hash == h && (endpoint == "" || f.p.endpoint == endpoint) {
			return true
		}
	}
	return false
}

// addForeign pools a transaction of a foreign sender of key pk of signer with nonce (0: the
// key's nonce + 1 when a block takes it). It has no actions and needs no signature: it stands
// for a transaction signed elsewhere with the same key. c.mu is held.
func (c *chain) addForeign(signer string, pk near.PublicKey, nonce uint64) near.Hash {
	c.foreignSeq++
	id := binary.LittleEndian.AppendUint64([]byte("fakenear foreign\x00"+signer+"\x00"), c.foreignSeq)
	hash := near.Hash(sha256.Sum256(append(id, pk[:]...)))
	tx := near.Transaction{SignerID: signer, PublicKey: pk, Nonce: nonce, ReceiverID: signer, BlockHash: c.head().hash}
	c.pool.add(&pooledTx{hash: hash, signed: &near.SignedTransaction{Transaction: tx}, endpoint: "foreign", foreign: true, autoNonce: nonce == 0})
	return hash
}

// level is how far a landed transaction got: executed in the block that included it, final
// once that block is.
func (c *chain) level(rec *txRecord) near.TxExecutionStatus {
	if rec.height <= c.final().height {
		return near.TxFinal
	}
	return near.TxExecutedOptimistic
}

// meets is nearcore's tx_execution_status_meets_expectations.
func meets(want, have near.TxExecutionStatus) bool {
	switch want {
	case near.TxNone:
		return true
	case near.TxIncluded:
		return have != near.TxNone
	case near.TxExecutedOptimistic:
		return have == near.TxExecutedOptimistic || have == near.TxExecuted || have == near.TxFinal
	case near.TxIncludedFinal:
		return have == near.TxIncludedFinal || have == near.TxExecuted || have == near.TxFinal
	case near.TxExecuted:
		return have == near.TxExecuted || have == near.TxFinal
	case near.TxFinal:
		return have == near.TxFinal
	}
	return false
}

// await calls check under c.mu now and after every block until it returns true (await then
// returns true), the deadline passes, ctx ends or the chain closes (false).
func (c *chain) await(ctx context.Context, deadline time.Time, check func() bool) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		c.mu.Lock()
		done := check()
		changed := c.changed
		c.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		case <-c.closed:
			return false
		}
	}
}

// addAccount creates a (genesis-like) account in every retained block's state, so that views
// at any finality see it at once. c.mu is held or the chain is not shared yet.
func (c *chain) addAccount(a Account) error {
	if err := a.check(); err != nil {
		return err
	}
	if c.head().state.accounts[a.ID] != nil {
		return fmt.Errorf("fakenear: account %s exists", a.ID)
	}
	for _, b := range c.blocks {
		b.state.accounts[a.ID] = &account{balance: a.Balance.Big(), keys: map[near.PublicKey]*accessKey{}}
	}
	for _, k := range a.Keys {
		if err := c.addKey(a.ID, k); err != nil {
			return err
		}
	}
	return nil
}

// addKey installs k on account id in every retained state. Its nonce defaults to head·10⁶: what
// an AddKey landing in the next block would give.
func (c *chain) addKey(id string, k AccountKey) error {
	if c.head().state.accounts[id] == nil {
		return fmt.Errorf("fakenear: account %s does not exist", id)
	}
	if c.head().state.key(id, k.PublicKey) != nil {
		return fmt.Errorf("fakenear: account %s already has key %s", id, k.PublicKey)
	}
	ak := &accessKey{nonce: c.head().height * nonceMultiplier, perm: near.AccessKeyPermission{FullAccess: true}}
	if k.Permission != nil {
		ak.perm = *k.Permission
	}
	if k.Nonce != nil {
		ak.nonce = *k.Nonce
	}
	for _, b := range c.blocks {
		if acct := b.state.accounts[id]; acct != nil {
			acct.keys[k.PublicKey] = ak.clone()
		}
	}
	return nil
}
