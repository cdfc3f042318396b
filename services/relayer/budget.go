package relayer

import (
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// The deposit budget, kind relayer-budget, one actor per account (id: the account id): the
// deposits of the account's intents accepted in the rolling window of its policy's
// deposit_budget. A submit charges its intent here before the intent is claimed or queued
// anywhere, so a budget that would be exceeded refuses it before anything of it is written.
//
// A charge is kept by idempotency key and request hash: the same intent charged again within
// RepeatWithin — two identical submits racing, or a retry whose first attempt was charged and
// then failed before its claim — is charged once. Another body under the same key is charged
// on its own (both may race for the claim: the budget counts both, erring on the side of
// refusing). A charge older than the window, or than RepeatWithin (its record may be gone,
// and the key reused by a new intent), is not a repeat. The budget's amount and window come
// with each request, from the policy in force.
//
// Storage:
//
//	b/<idempotency key>\x00<request hash>   charge (JSON): when and how much
//	t/<u64 at><idempotency key>\x00<hash>  empty; the charges in time order (an actors.TimeIndex)
//	s                                       the sum of the stored charges (decimal yocto)
//
// Charges that left the window are removed first by every charge, refused or not (pruneBatch
// at a time: until they are all gone the sum over-counts, which refuses more, never less, and
// every later request removes more). A refusal writes nothing else.

// BudgetKindName is the budget kind's name.
const BudgetKindName = "relayer-budget"

// The budget's methods.
const (
	MethodCharge = "charge"
	MethodUsage  = "usage"
)

var (
	prefixCharge = []byte("b/")
	chargeTimes  = actors.TimeIndex{Prefix: []byte("t/")}
	keyChargeSum = []byte("s")
)

// pruneBatch bounds the old charges one message removes; retryScan the charges read to tell
// when a refused one would fit.
const (
	pruneBatch = 4096
	retryScan  = 4096
)

// ChargeRequest charges Amount (decimal yocto) for the intent IdempotencyKey of RequestHash
// against a budget of Budget per Window (ms), ending now; a charge of the same intent made
// less than RepeatWithin (ms) ago, and in the window, is not made again.
type ChargeRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
	RequestHash    []byte `json:"request_hash"`
	Amount         string `json:"amount"`
	Budget         string `json:"budget"`
	Window         int64  `json:"window_ms"`
	RepeatWithin   int64  `json:"repeat_within_ms"`
}

// UsageRequest asks for the deposits charged in the Window (ms) that ends now.
type UsageRequest struct {
	Window int64 `json:"window_ms"`
}

// Usage is the reply of charge and usage: the deposits charged in the window.
type Usage struct {
	Used string `json:"used"`
}

type charge struct {
	At     int64  `json:"at"`
	Amount string `json:"amount"`
}

// BudgetKind is the budget kind.
func BudgetKind() actors.Kind {
	return actors.Kind{Name: BudgetKindName, New: func(string) actors.Handler { return budgetActor{} }}
}

type budgetActor struct{}

var budgetMethods = actors.Dispatch[budgetActor]{Name: "relayer budget", Methods: map[string]actors.Method[budgetActor]{
	MethodCharge: actors.JSON(budgetActor.charge),
	MethodUsage:  actors.JSON(budgetActor.usage),
}}

func (a budgetActor) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	return budgetMethods.Receive(a, ctx, req)
}

// chargeName names the charge of one intent: its idempotency key and request hash.
func chargeName(idem string, hash []byte) string { return idem + "\x00" + string(hash) }

func chargeKey(name string) []byte { return append([]byte(string(prefixCharge)), name...) }

func (budgetActor) charge(ctx *actors.Context, req ChargeRequest) ([]byte, error) {
	amount, ok1 := new(big.Int).SetString(req.Amount, 10)
	budget, ok2 := new(big.Int).SetString(req.Budget, 10)
	if !ok1 || !ok2 || amount.Sign() < 0 || budget.Sign() < 0 || req.Window <= 0 {
		return nil, fmt.Errorf("relayer budget: malformed charge %+v", req)
	}
	now := ctx.Now().UnixMilli()
	from := now - req.Window + 1 // charges at or after from are in the window
	sum, err := prune(ctx, from)
	if err != nil {
		return nil, err
	}
	name := chargeName(req.IdempotencyKey, req.RequestHash)
	var prev charge
	found, err := getJSON(ctx, chargeKey(name), &prev)
	if err != nil {
		return nil, err
	}
	if found && prev.At >= from && now-prev.At < req.RepeatWithin {
		return json.Marshal(Usage{Used: sum.String()}) // the same intent, charged already
	}
	if found {
		// Charged long ago, and in the window still: a new intent under a reused key. Its
		// old charge stays counted until it leaves the window (under its time); a retry of
		// the new one may then be charged again, which errs on the side of refusing.
		name = fmt.Sprintf("%s\x00%d", name, now)
	}
	if total := new(big.Int).Add(sum, amount); total.Cmp(budget) > 0 {
		e := actors.Errorf("budget_exceeded", "policy: deposit_budget is %s yocto per %s; %s is charged in the window and the intent attaches %s",
			budget, time.Duration(req.Window)*time.Millisecond, sum, amount)
		if e.RetryAfter, err = fitsAfter(ctx, req.Window, now, from, total.Sub(total, budget)); err != nil {
			return nil, err
		}
		return nil, e
	}
	sum.Add(sum, amount)
	if err := putJSON(ctx, chargeKey(name), charge{At: now, Amount: amount.String()}); err != nil {
		return nil, err
	}
	chargeTimes.Put(ctx, now, name, nil)
	ctx.Put(keyChargeSum, []byte(sum.String()))
	return json.Marshal(Usage{Used: sum.String()})
}

// prune removes up to pruneBatch charges made before from, and returns the sum of the
// charges left. Its writes stand also when the charge is then refused: they change no
// answer, and a budget refused again and again must still see its window move on.
func prune(ctx *actors.Context, from int64) (*big.Int, error) {
	old, err := chargeTimes.Before(ctx, from, nil, pruneBatch)
	if err != nil {
		return nil, err
	}
	sum, err := sumLeft(ctx, old)
	if err != nil || len(old) == 0 {
		return sum, err
	}
	for _, kv := range old {
		_, name, _ := chargeTimes.Parse(kv.Key) // parsed by sumLeft
		ctx.Delete(kv.Key)
		ctx.Delete(chargeKey(name))
	}
	ctx.Put(keyChargeSum, []byte(sum.String()))
	return sum, nil
}

// sumLeft is the stored sum of the charges less those of the time index entries gone (never
// below zero, whatever was stored).
func sumLeft(ctx *actors.Context, gone []actors.KV) (*big.Int, error) {
	sum, err := loadSum(ctx)
	if err != nil {
		return nil, err
	}
	for _, kv := range gone {
		_, v, err := chargeAt(ctx, kv.Key)
		if err != nil {
			return nil, err
		}
		sum.Sub(sum, v)
	}
	if sum.Sign() < 0 {
		sum.SetInt64(0)
	}
	return sum, nil
}

// chargeAt reads the charge of a time index key: when it was made and its amount.
func chargeAt(ctx *actors.Context, key []byte) (int64, *big.Int, error) {
	at, name, err := chargeTimes.Parse(key)
	if err != nil {
		return 0, nil, err
	}
	var c charge
	if _, err := getJSON(ctx, chargeKey(name), &c); err != nil {
		return 0, nil, err
	}
	v, ok := new(big.Int).SetString(c.Amount, 10)
	if !ok {
		v = new(big.Int)
	}
	return at, v, nil
}

// fitsAfter is how long until enough of the window's charges age out to free excess: the
// earliest charges, in time order, whose amounts add up to excess leave the window one window
// after the last of them. Past retryScan charges it answers the whole window.
func fitsAfter(ctx *actors.Context, windowMS, now, from int64, excess *big.Int) (time.Duration, error) {
	live, err := chargeTimes.From(ctx, from, retryScan)
	if err != nil {
		return 0, err
	}
	freed := new(big.Int)
	for _, kv := range live {
		at, v, err := chargeAt(ctx, kv.Key)
		if err != nil {
			return 0, err
		}
		if freed.Add(freed, v).Cmp(excess) >= 0 {
			return max(time.Duration(at+windowMS-now)*time.Millisecond, time.Millisecond), nil
		}
	}
	return time.Duration(windowMS) * time.Millisecond, nil
}

// usage answers the deposits charged in the window, without writing.
func (budgetActor) usage(ctx *actors.Context, req UsageRequest) ([]byte, error) {
	old, err := chargeTimes.Before(ctx, ctx.Now().UnixMilli()-req.Window+1, nil, 0)
	if err != nil {
		return nil, err
	}
	sum, err := sumLeft(ctx, old)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Usage{Used: sum.String()})
}

func loadSum(ctx *actors.Context) (*big.Int, error) {
	b, ok, err := ctx.Get(keyChargeSum)
	if err != nil || !ok {
		return new(big.Int), err
	}
	v, ok := new(big.Int).SetString(string(b), 10)
	if !ok {
		return nil, fmt.Errorf("relayer budget %s: malformed sum %q", ctx.ID(), b)
	}
	return v, nil
}
