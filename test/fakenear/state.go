package fakenear

import (
	"math/big"

	"github.com/shardkeeper/shardkeeper/near"
)

// state is the chain state after a block: accounts with their balances and access keys. Every
// block owns its state (produce works on a clone of the previous one), so that views at an
// older block — the final one — see what that block held. States are small in tests; a clone
// per block is cheaper than the bookkeeping of sharing.
type state struct {
	accounts map[string]*account
}

type account struct {
	balance *big.Int
	keys    map[near.PublicKey]*accessKey
}

// accessKey is an access key as the chain stores it. nonce is the nonce of the last transaction
// (or delegate action) signed with the key that landed, or the key's starting nonce.
type accessKey struct {
	nonce uint64
	perm  near.AccessKeyPermission
}

func newState() *state { return &state{accounts: map[string]*account{}} }

func (s *state) clone() *state {
	c := &state{accounts: make(map[string]*account, len(s.accounts))}
	for id, a := range s.accounts {
		c.accounts[id] = a.clone()
	}
	return c
}

func (a *account) clone() *account {
	c := &account{balance: new(big.Int).Set(a.balance), keys: make(map[near.PublicKey]*accessKey, len(a.keys))}
	for pk, k := range a.keys {
		c.keys[pk] = k.clone()
	}
	return c
}

// clone deep-copies the permission too: a function-call key's allowance is spent in place.
func (k *accessKey) clone() *accessKey {
	c := &accessKey{nonce: k.nonce, perm: near.AccessKeyPermission{FullAccess: k.perm.FullAccess}}
	if fc := k.perm.FunctionCall; fc != nil {
		cp := &near.FunctionCallPermission{ReceiverID: fc.ReceiverID, MethodNames: append([]string(nil), fc.MethodNames...)}
		if fc.Allowance != nil {
			a := *fc.Allowance
			cp.Allowance = &a
		}
		c.perm.FunctionCall = cp
	}
	return c
}

func (s *state) key(accountID string, pk near.PublicKey) *accessKey {
	if a := s.accounts[accountID]; a != nil {
		return a.keys[pk]
	}
	return nil
}

// credit adds amount to id's balance; an account that does not exist (deleted meanwhile)
// receives nothing, the amount is burnt.
func (s *state) credit(id string, amount *big.Int) {
	if a := s.accounts[id]; a != nil {
		a.balance.Add(a.balance, amount)
	}
}

// u128 converts a balance for JSON; balances never leave 0..2^128-1 (they start from U128s
// and move by U128 amounts checked against them).
func u128(b *big.Int) near.U128 {
	v, err := near.U128FromBig(b)
	if err != nil {
		panic("fakenear: balance out of u128 range: " + b.String())
	}
	return v
}
