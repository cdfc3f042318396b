package relayer

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/services"
)

// MaxWait bounds the ?wait= of a GET of an intent.
const MaxWait = api.MaxWait

// server answers the relayer's HTTP routes. A submit is judged by its account's policy, then
// charged against the account's deposit budget, then records where its idempotency key lives
// in the index (claim) before it submits there; a read looks it up first, so a repeat reaches
// its record whatever the keys are now.
type server struct {
	caller  actors.Caller
	codes   *api.Codes // the node's error codes, which the routes answer with
	timeout time.Duration
	keys    *Keys   // the keys loaded at start: who signs
	access  *access // the policies and account tokens in force: who may ask what
	token   string  // the relayer token
	metrics *Metrics
	// retention is how long terminal records are kept: an idempotency key seen longer ago
	// may be a new intent (its record gone), and is charged again.
	retention time.Duration
}

func routes(env services.Env, cfg config.Config) []api.Route {
	o := Settings.Get(cfg)
	s := newServer(env.Caller, env.Codes, cfg.RequestTimeout, o.keys)
	s.access, s.token, s.metrics, s.retention = newAccess(o.KeysFile, o.keys), o.Token, NewMetrics(env.Registerer), o.Retention
	return []api.Route{
		{Pattern: "POST /v1/relayers/{account_id}/intents", Handler: s.auth(s.submit)},
		{Pattern: "GET /v1/relayers/{account_id}/intents/{idempotency_key}", Handler: s.auth(s.get)},
		{Pattern: "GET /v1/relayers/{account_id}", Handler: s.auth(s.status)},
	}
}

// newServer serves keys, whose policies stay as loaded (routes gives it the reloading rules
// of the keys file, the relayer token and metrics).
func newServer(caller actors.Caller, codes *api.Codes, timeout time.Duration, keys *Keys) *server {
	return &server{caller: caller, codes: codes, timeout: timeout, keys: keys, access: newAccess("", keys), retention: DefaultRetention}
}

// auth admits a request with the token of its path's account: the account's own when its
// policy names a token file, the relayer token otherwise (also for an account in no keys
// file, which is then unknown_relayer: an account's existence is not told without a token).
func (s *server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, _ := s.access.rules().token(r.PathValue("account_id"), s.token)
		api.Bearer(token, "relayer", h)(w, r)
	}
}

// account returns the path's account and its configured keys; an account in no keys file is
// unknown_relayer.
func (s *server) account(w http.ResponseWriter, r *http.Request) (string, []near.PublicKey, bool) {
	account := r.PathValue("account_id")
	keys := s.keys.PublicKeys(account)
	if len(keys) == 0 {
		s.codes.WriteError(w, actors.Errorf("unknown_relayer", "no relayer keys are configured for this account"))
		return "", nil, false
	}
	return account, keys, true
}

func (s *server) submit(w http.ResponseWriter, r *http.Request) {
	account, keys, ok := s.account(w, r)
	if !ok {
		return
	}
	var body SubmitRequest
	if err := api.DecodeJSON(r, &body); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	c, err := body.check()
	if err != nil {
		s.codes.WriteError(w, err)
		return
	}
	body.IdempotencyKey = c.idem
	if err := s.admit(r.Context(), account, c); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	want, _ := Assign(c.idem, keys)
	var at Placement
	err = api.CallJSON(r.Context(), s.caller, s.timeout, IndexKindName, IndexID(account, c.idem), MethodClaim,
		ClaimRequest{IdempotencyKey: c.idem, RequestHash: c.requestHash, Key: want.String()}, &at)
	if err != nil {
		s.codes.WriteError(w, err)
		return
	}
	var out Submitted
	for attempt := 0; ; attempt++ {
		pk, perr := near.ParsePublicKey(at.Key)
		if perr != nil {
			s.codes.WriteError(w, perr)
			return
		}
		err = api.CallJSON(r.Context(), s.caller, s.timeout, KindName, ActorID(account, pk), MethodSubmit, body, &out)
		// Claimed on a key that was removed before the submit reached it: it holds no record,
		// so the intent goes where the hash points now.
		if attempt > 0 || !isCode(err, "unknown_relayer") || at.Key == want.String() {
			break
		}
		err = api.CallJSON(r.Context(), s.caller, s.timeout, IndexKindName, IndexID(account, c.idem), MethodMove,
			MoveRequest{IdempotencyKey: c.idem, From: at.Key, To: want.String()}, &at)
		if err != nil {
			break
		}
	}
	if err != nil {
		s.codes.WriteError(w, err)
		return
	}
	status := http.StatusCreated
	if out.Existed {
		status = http.StatusOK
	}
	api.WriteJSON(w, status, out.Intent)
}

// admit judges an intent by its account's policy and charges its deposit to the account's
// budget; a refusal (policy_denied, budget_exceeded) has written nothing. A repeat of an intent
// already claimed with the same body passes as a repeat — it answers its record, also after
// the policy was tightened — and is not charged again; the same key with another body is
// idempotency_conflict at once, uncharged.
func (s *server) admit(ctx context.Context, account string, c checked) error {
	p := s.access.rules().Policy(account)
	if p == nil {
		p = &Policy{}
	}
	deposit, rule, refusal := p.check(account, c.view)
	if refusal == nil && (p.Budget == nil || deposit.Sign() == 0) {
		return nil // nothing to look up: the claim tells a repeat from a conflict
	}
	var at Placement
	err := api.CallJSON(ctx, s.caller, s.timeout, IndexKindName, IndexID(account, c.idem), MethodLookup, GetRequest{c.idem}, &at)
	switch {
	case err == nil && bytes.Equal(at.RequestHash, c.requestHash):
		return nil // a repeat: accepted and charged before
	case err == nil:
		return conflict(c.idem)
	case !isCode(err, "unknown_intent"):
		return err
	case refusal != nil:
		s.metrics.refused(account, rule)
		return refusal
	}
	err = api.CallJSON(ctx, s.caller, s.timeout, BudgetKindName, account, MethodCharge, ChargeRequest{
		IdempotencyKey: c.idem, RequestHash: c.requestHash, Amount: deposit.String(),
		Budget: p.Budget.Amount.String(), Window: p.Budget.Window.Milliseconds(), RepeatWithin: s.retention.Milliseconds()}, nil)
	if isCode(err, "budget_exceeded") {
		s.metrics.refused(account, ruleDepositBudget)
	}
	return err
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	account, _, ok := s.account(w, r)
	if !ok {
		return
	}
	idem := r.PathValue("idempotency_key")
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			api.WriteAPIError(w, api.Errorf(http.StatusBadRequest, "invalid_request", "wait: a duration such as 10s is expected"))
			return
		}
		wait = min(d, MaxWait)
	}
	deadline := time.Now().Add(wait)
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		in, err := s.read(r.Context(), account, idem)
		if err != nil {
			s.codes.WriteError(w, err)
			return
		}
		left := time.Until(deadline)
		if in.terminal() || left <= 0 {
			api.WriteJSON(w, http.StatusOK, in)
			return
		}
		select {
		case <-time.After(min(pause, left)):
		case <-r.Context().Done():
			return
		}
	}
}

// read finds an intent's record through the index. A record that has just moved to another
// key is looked up again there.
func (s *server) read(ctx context.Context, account, idem string) (Intent, error) {
	var in Intent
	if !idemPattern.MatchString(idem) {
		return in, unknownIntent(idem)
	}
	var err error
	for range 2 {
		var at Placement
		if err = api.CallJSON(ctx, s.caller, s.timeout, IndexKindName, IndexID(account, idem), MethodLookup, GetRequest{idem}, &at); err != nil {
			return in, err
		}
		pk, perr := near.ParsePublicKey(at.Key)
		if perr != nil {
			return in, perr
		}
		err = api.CallJSON(ctx, s.caller, s.timeout, KindName, ActorID(account, pk), MethodGet, GetRequest{idem}, &in)
		if !isCode(err, "unknown_intent") {
			break
		}
	}
	return in, err
}

func (in Intent) terminal() bool {
	return in.Status == StatusSucceeded || in.Status == StatusFailed || in.Status == StatusRejected
}

// RelayerStatus is the answer of GET /v1/relayers/{account_id}.
type RelayerStatus struct {
	AccountID string      `json:"account_id"`
	Keys      []KeyStatus `json:"keys"`
	Policy    PolicyView  `json:"policy"`
	// BudgetUsed is what the intents accepted in the current window attach (with a budget).
	BudgetUsed *string `json:"budget_used,omitempty"`
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	account, keys, ok := s.account(w, r)
	if !ok {
		return
	}
	out := RelayerStatus{AccountID: account, Keys: make([]KeyStatus, len(keys))}
	for i, pk := range keys {
		if err := api.CallJSON(r.Context(), s.caller, s.timeout, KindName, ActorID(account, pk), MethodStatus, struct{}{}, &out.Keys[i]); err != nil {
			s.codes.WriteError(w, err)
			return
		}
	}
	p := s.access.rules().Policy(account)
	out.Policy = p.view()
	if p != nil && p.Budget != nil {
		var u Usage
		if err := api.CallJSON(r.Context(), s.caller, s.timeout, BudgetKindName, account, MethodUsage, UsageRequest{Window: p.Budget.Window.Milliseconds()}, &u); err != nil {
			s.codes.WriteError(w, err)
			return
		}
		out.BudgetUsed = &u.Used
	}
	api.WriteJSON(w, http.StatusOK, out)
}
