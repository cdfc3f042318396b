package fakenear

import (
	"slices"

	"github.com/shardkeeper/shardkeeper/near"
)

// pooledTx is a transaction waiting in the pool for a block.
type pooledTx struct {
	hash     near.Hash
	signed   *near.SignedTransaction
	seq      uint64 // arrival order: ties of equal nonces go to the earlier
	endpoint string // the endpoint it was sent to ("" for the fake's own)

	// foreign marks a transaction of another sender of the same key (BumpNonce, the
	// foreign_nonce fault): it carries no signature and no actions, only a nonce. With
	// autoNonce its nonce is the key's nonce + 1 at the block that takes it.
	foreign   bool
	autoNonce bool
}

// poolKey groups transactions as nearcore's pool does: by signer and access key.
type poolKey struct {
	signer string
	key    near.PublicKey
}

// pool holds the transactions accepted and not yet taken by a block. Invariant: a hash is in
// the pool at most once (byHash); every pooled transaction is in exactly one group.
type pool struct {
	groups map[poolKey][]*pooledTx
	order  []poolKey // groups in the order they first appeared: blocks visit them in it
	byHash map[near.Hash]*pooledTx
	seq    uint64
}

func newPool() *pool {
	return &pool{groups: map[poolKey][]*pooledTx{}, byHash: map[near.Hash]*pooledTx{}}
}

// add inserts p unless its hash is already pooled (nearcore: InsertTransactionResult::Duplicate),
// and reports whether it did.
func (p *pool) add(t *pooledTx) bool {
	if _, dup := p.byHash[t.hash]; dup {
		return false
	}
	p.seq++
	t.seq = p.seq
	k := poolKey{t.signed.Transaction.SignerID, t.signed.Transaction.PublicKey}
	if _, ok := p.groups[k]; !ok {
		p.order = append(p.order, k)
	}
	p.groups[k] = append(p.groups[k], t)
	p.byHash[t.hash] = t
	return true
}

func (p *pool) has(h near.Hash) bool { _, ok := p.byHash[h]; return ok }

func (p *pool) size() int { return len(p.byHash) }

// drain empties the pool and returns its groups, each sorted by nonce (then arrival), the order
// in which a block takes them. resolve fixes the nonce of auto-nonce foreign transactions first,
// so that they sort where they will land.
func (p *pool) drain(resolve func(*pooledTx)) [][]*pooledTx {
	out := make([][]*pooledTx, 0, len(p.order))
	for _, k := range p.order {
		g := p.groups[k]
		for _, t := range g {
			if t.autoNonce {
				resolve(t)
			}
		}
		slices.SortStableFunc(g, func(a, b *pooledTx) int {
			switch an, bn := a.signed.Transaction.Nonce, b.signed.Transaction.Nonce; {
			case an < bn:
				return -1
			case an > bn:
				return 1
			}
			return int(a.seq) - int(b.seq)
		})
		out = append(out, g)
	}
	p.groups, p.order, p.byHash = map[poolKey][]*pooledTx{}, nil, map[near.Hash]*pooledTx{}
	return out
}
