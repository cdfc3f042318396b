package fakenear

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"strings"

	"github.com/shardkeeper/shardkeeper/near"
)

// receipt is an action receipt: actions of predecessor run on receiver. deposit is what its
// actions attach, refunded to the predecessor when the receipt fails (nearcore sends a refund
// receipt; the fake credits it at once).
type receipt struct {
	id          near.Hash
	parent      near.Hash // the receipt that created this one; zero for a transaction's own
	predecessor string
	receiver    string
	signer      string
	signerKey   near.PublicKey
	actions     []near.Action
	deposit     *big.Int
}

// receiptOutcome is what a receipt's execution left: its status is an ExecutionStatusView
// ({"SuccessValue":""} or {"Failure":…}).
type receiptOutcome struct {
	receipt
	status json.RawMessage
}

// executor runs the receipts of one transaction in one block. The fake executes a
// transaction's receipts, and those they create, in the block that includes it: nearcore takes
// one block per hop between shards, which a relayer cannot tell from a fast chain.
type executor struct {
	st     *state
	height uint64
	txHash near.Hash
	n      uint32 // receipts created so far, for their ids
}

func (x *executor) nextID() near.Hash {
	b := append(append([]byte("fakenear receipt\x00"), x.txHash[:]...), binary.LittleEndian.AppendUint32(nil, x.n)...)
	x.n++
	return sha256.Sum256(b)
}

// run executes r and every receipt it creates, in creation order, and returns their outcomes.
func (x *executor) run(r receipt) []receiptOutcome {
	var out []receiptOutcome
	queue := []receipt{r}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		status, spawned := x.execute(r)
		out = append(out, receiptOutcome{receipt: r, status: status})
		queue = append(queue, spawned...)
	}
	return out
}

// execute applies r's actions to a scratch copy of the state: all of them or, when one fails,
// none (nearcore rolls back a failed receipt's state changes), in which case the deposit goes
// back to the predecessor and the receipts it would have created are not created.
func (x *executor) execute(r receipt) (json.RawMessage, []receipt) {
	scratch := x.st.clone()
	actor := r.predecessor
	var spawned []receipt
	for i, a := range r.actions {
		if kind := x.apply(scratch, r, &actor, a, &spawned); kind != nil {
			x.st.credit(r.predecessor, r.deposit)
			return actionFailure(i, kind), nil
		}
	}
	x.st.accounts = scratch.accounts
	return successValue, spawned
}

// apply runs one action of r on st and returns the ActionErrorKind that fails it, or nil.
// actor is the account acting on the receiver: the predecessor, or the receiver itself once a
// CreateAccount of this receipt created it (nearcore then lets the receipt manage its keys).
func (x *executor) apply(st *state, r receipt, actor *string, a near.Action, spawned *[]receipt) json.RawMessage {
	recv := st.accounts[r.receiver]
	// nearcore's check_account_existence.
	switch a.(type) {
	case near.CreateAccount:
		if recv != nil {
			return variant("AccountAlreadyExists", struct {
				AccountID string `json:"account_id"`
			}{r.receiver})
		}
	case near.Transfer:
		if recv == nil {
			if !isImplicit(r.receiver) {
				return accountDoesNotExist(r.receiver)
			}
			// A transfer to an implicit account id creates it, with the key the id is.
			var pk near.PublicKey
			_, _ = hex.Decode(pk[:], []byte(r.receiver)) // isImplicit checked the digits
			recv = &account{balance: new(big.Int), keys: map[near.PublicKey]*accessKey{
				pk: {nonce: (x.height - 1) * nonceMultiplier, perm: near.AccessKeyPermission{FullAccess: true}},
			}}
			st.accounts[r.receiver] = recv
		}
	default:
		if recv == nil {
			return accountDoesNotExist(r.receiver)
		}
	}
	// nearcore's check_actor_permissions.
	switch a.(type) {
	case near.DeployContract, near.Stake, near.AddKey, near.DeleteKey, near.DeleteAccount:
		if *actor != r.receiver {
			return variant("ActorNoPermission", struct {
				AccountID string `json:"account_id"`
				ActorID   string `json:"actor_id"`
			}{r.receiver, *actor})
		}
	}

	switch a := a.(type) {
	case near.CreateAccount:
		if kind := createAllowed(r.receiver, r.predecessor); kind != nil {
			return kind
		}
		st.accounts[r.receiver] = &account{balance: new(big.Int), keys: map[near.PublicKey]*accessKey{}}
		*actor = r.receiver
	case near.Transfer:
		st.credit(r.receiver, a.Deposit.Big())
	case near.FunctionCall:
		st.credit(r.receiver, a.Deposit.Big())
		if a.MethodName == "fail" {
			return variant("FunctionCallError", map[string]string{"ExecutionError": "Smart contract panicked: fail"})
		}
	case near.AddKey:
		if recv.keys[a.PublicKey] != nil {
			return variant("AddKeyAlreadyExists", struct {
				AccountID string         `json:"account_id"`
				PublicKey near.PublicKey `json:"public_key"`
			}{r.receiver, a.PublicKey})
		}
		// nearcore ignores the nonce the action carries: a new key starts at (height-1)·10⁶, so
		// that a re-added key cannot replay the transactions of its previous life.
		k := &accessKey{nonce: (x.height - 1) * nonceMultiplier, perm: a.AccessKey.Permission}
		recv.keys[a.PublicKey] = k.clone()
	case near.DeleteKey:
		if recv.keys[a.PublicKey] == nil {
			return variant("DeleteKeyDoesNotExist", struct {
				AccountID string         `json:"account_id"`
				PublicKey near.PublicKey `json:"public_key"`
			}{r.receiver, a.PublicKey})
		}
		delete(recv.keys, a.PublicKey)
	case near.DeleteAccount:
		st.credit(a.BeneficiaryID, recv.balance)
		delete(st.accounts, r.receiver)
	case near.SignedDelegateAction:
		return x.delegate(st, r, a, spawned)
	case near.DeployContract, near.Stake:
		// Accepted and ignored: the fake has no contracts and no validators.
	}
	return nil
}

func accountDoesNotExist(id string) json.RawMessage {
	return variant("AccountDoesNotExist", struct {
		AccountID string `json:"account_id"`
	}{id})
}

// Account creation rules of nearcore (action_create_account).
const (
	registrarAccountID         = "registrar"
	minTopLevelAccountIDLength = 32
)

// createAllowed applies nearcore's rules: a sub-account only by its parent, a short top-level
// account only by the registrar, an implicit account id never by CreateAccount.
func createAllowed(id, predecessor string) json.RawMessage {
	notAllowed := func() json.RawMessage {
		return variant("CreateAccountNotAllowed", struct {
			AccountID     string `json:"account_id"`
			PredecessorID string `json:"predecessor_id"`
		}{id, predecessor})
	}
	if isImplicit(id) {
		return notAllowed()
	}
	dot := strings.IndexByte(id, '.')
	if dot < 0 {
		if len(id) < minTopLevelAccountIDLength && predecessor != registrarAccountID {
			return variant("CreateAccountOnlyByRegistrar", struct {
				AccountID     string `json:"account_id"`
				RegistrarID   string `json:"registrar_account_id"`
				PredecessorID string `json:"predecessor_id"`
			}{id, registrarAccountID, predecessor})
		}
		return nil
	}
	if id[dot+1:] != predecessor {
		return notAllowed()
	}
	return nil
}

// isImplicit reports whether id is a NEAR-implicit account id: 64 lowercase hex digits, the
// ed25519 public key the account is created with.
func isImplicit(id string) bool {
	if len(id) != 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
