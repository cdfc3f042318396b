package relayer

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/near"
)

// Policy is what one account's intents may do: the "policy" of its entry in the keys file. A
// relayer token lets its holder state intents, never sign arbitrary transactions, so every
// intent is checked against its account's policy before anything is written for it.
//
// A nil list allows anything (the field was absent); an empty one allows nothing. Whatever the
// policy, the relayer never changes its own account's keys on a caller's word (ownAccount).
type Policy struct {
	Receivers  []string   // exact account ids, or "*.suffix" for any sub-account of suffix
	Actions    []string   // action kinds (near.ActionKind names), "Delegate" for signed_delegate
	Methods    []string   // FunctionCall method names
	MaxDeposit *near.U128 // the most one intent may attach
	Budget     *Budget    // the most the intents accepted in a rolling window may attach
	TokenFile  string     // the account's own token file (its content is never kept here)
}

// Budget bounds the deposits of the intents accepted in any rolling Window.
type Budget struct {
	Amount near.U128
	Window time.Duration
}

// policyFile is the JSON form of a Policy.
type policyFile struct {
	Receivers     []string `json:"receivers"`
	Actions       []string `json:"actions"`
	Methods       []string `json:"methods"`
	MaxDeposit    *string  `json:"max_deposit"`
	DepositBudget *struct {
		Amount string `json:"amount"`
		Window string `json:"window"`
	} `json:"deposit_budget"`
	TokenFile string `json:"token_file"`
}

// PolicyActions are the action kinds a policy may name.
var PolicyActions = []string{"CreateAccount", "Transfer", "FunctionCall", "AddKey", "DeleteKey", "Delegate"}

// parse checks a policy of the keys file. Its errors name the field, never a secret.
func (f *policyFile) parse() (*Policy, error) {
	if f == nil {
		return &Policy{}, nil
	}
	p := &Policy{Receivers: f.Receivers, Actions: f.Actions, Methods: f.Methods, TokenFile: f.TokenFile}
	for _, r := range f.Receivers {
		id, wild := strings.CutPrefix(r, "*.")
		if err := near.ValidateAccountID(id); err != nil {
			if wild {
				return nil, fmt.Errorf("receivers: %q: the suffix of a wildcard must be an account id: %w", r, err)
			}
			return nil, fmt.Errorf("receivers: %q: an account id or *.<account id> is expected: %w", r, err)
		}
	}
	for _, a := range f.Actions {
		if !slices.Contains(PolicyActions, a) {
			return nil, fmt.Errorf("actions: %q is not one of %s", a, strings.Join(PolicyActions, ", "))
		}
	}
	for _, m := range f.Methods {
		if m == "" || len(m) > 256 {
			return nil, fmt.Errorf("methods: a method name of 1 to 256 bytes is expected, not %q", ident.Clip(m))
		}
	}
	if f.MaxDeposit != nil {
		v, err := near.ParseU128(*f.MaxDeposit)
		if err != nil {
			return nil, fmt.Errorf("max_deposit: %w", err)
		}
		p.MaxDeposit = &v
	}
	if b := f.DepositBudget; b != nil {
		amount, err := near.ParseU128(b.Amount)
		if err != nil {
			return nil, fmt.Errorf("deposit_budget.amount: %w", err)
		}
		window, err := time.ParseDuration(b.Window)
		if err != nil || window < time.Second {
			return nil, fmt.Errorf("deposit_budget.window: a duration of at least 1s such as 24h is expected, not %q", ident.Clip(b.Window))
		}
		p.Budget = &Budget{Amount: amount, Window: window}
	}
	return p, nil
}

// intentView is what a policy judges of a checked intent.
type intentView struct {
	delegate bool
	receiver string        // the transaction's receiver, or the delegate action's
	actions  []near.Action // the transaction's actions, or the delegate action's inner ones
}

// Policy rules, as refusals name them (in metrics too).
const (
	ruleOwnAccount    = "own_account"
	ruleActions       = "actions"
	ruleReceivers     = "receivers"
	ruleMethods       = "methods"
	ruleMaxDeposit    = "max_deposit"
	ruleDepositBudget = "deposit_budget"
)

// denied is the policy_denied outcome.
func denied(format string, args ...any) error {
	return actors.Errorf("policy_denied", "policy: "+format, args...)
}

// ownKeyActions are the actions that change an account's keys (or remove it): never signed
// for the relayer's own account on a caller's word, whatever its policy says.
var ownKeyActions = []near.ActionKind{near.KindAddKey, near.KindDeleteKey, near.KindDeleteAccount}

// check judges an intent of account by p (nil: the default policy) and returns the deposit
// the relayer would attach, or the refusal and the rule that refused. It decides only; the
// budget's bookkeeping is the caller's.
func (p *Policy) check(account string, in intentView) (*big.Int, string, error) {
	if p == nil {
		p = &Policy{}
	}
	if in.receiver == account {
		for _, a := range in.actions {
			if slices.Contains(ownKeyActions, a.Kind()) {
				return nil, ruleOwnAccount, denied("%s on the relayer account %s itself is never signed", a.Kind(), account)
			}
		}
	}
	kinds := []string{"Delegate"}
	if !in.delegate {
		kinds = kinds[:0]
		for _, a := range in.actions {
			kinds = append(kinds, a.Kind().String())
		}
	}
	if p.Actions != nil {
		for _, k := range kinds {
			if !slices.Contains(p.Actions, k) {
				return nil, ruleActions, denied("actions does not allow %s", k)
			}
		}
	}
	if p.Receivers != nil && !slices.ContainsFunc(p.Receivers, func(r string) bool { return receiverMatches(r, in.receiver) }) {
		return nil, ruleReceivers, denied("receivers does not allow receiver_id %s", ident.Quote(in.receiver))
	}
	deposit := new(big.Int)
	for _, a := range in.actions {
		fc, ok := a.(near.FunctionCall)
		if ok && p.Methods != nil && !slices.Contains(p.Methods, fc.MethodName) {
			return nil, ruleMethods, denied("methods does not allow %s", ident.Quote(fc.MethodName))
		}
		if in.delegate {
			continue // the inner actions' deposits are the delegate's sender's, not the relayer's
		}
		switch a := a.(type) {
		case near.FunctionCall:
			deposit.Add(deposit, a.Deposit.Big())
		case near.Transfer:
			deposit.Add(deposit, a.Deposit.Big())
		}
	}
	if p.MaxDeposit != nil && deposit.Cmp(p.MaxDeposit.Big()) > 0 {
		return nil, ruleMaxDeposit, denied("max_deposit is %s yocto, the intent attaches %s", p.MaxDeposit, deposit)
	}
	if p.Budget != nil && deposit.Cmp(p.Budget.Amount.Big()) > 0 {
		return nil, ruleDepositBudget, denied("deposit_budget is %s yocto per %s, the intent alone attaches %s", p.Budget.Amount, p.Budget.Window, deposit)
	}
	return deposit, "", nil
}

// receiverMatches reports whether the policy entry rule allows receiver: an exact id, or
// "*.suffix" for any sub-account of suffix (not suffix itself).
func receiverMatches(rule, receiver string) bool {
	if suffix, ok := strings.CutPrefix(rule, "*."); ok {
		return strings.HasSuffix(receiver, "."+suffix)
	}
	return rule == receiver
}

// PolicyView is a policy as GET /v1/relayers/{account_id} shows it: the keys file's fields but
// token_file (a path on the server is none of the caller's business).
type PolicyView struct {
	Receivers     []string    `json:"receivers"`
	Actions       []string    `json:"actions"`
	Methods       []string    `json:"methods"`
	MaxDeposit    *near.U128  `json:"max_deposit"`
	DepositBudget *BudgetView `json:"deposit_budget"`
}

// BudgetView is a deposit budget as the API shows it.
type BudgetView struct {
	Amount near.U128 `json:"amount"`
	Window string    `json:"window"`
}

func (p *Policy) view() PolicyView {
	if p == nil {
		return PolicyView{}
	}
	v := PolicyView{Receivers: p.Receivers, Actions: p.Actions, Methods: p.Methods, MaxDeposit: p.MaxDeposit}
	if p.Budget != nil {
		v.DepositBudget = &BudgetView{Amount: p.Budget.Amount, Window: p.Budget.Window.String()}
	}
	return v
}
