package relayer

import (
	"context"
	"net/http"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/near"
)

// MaxWait bounds the ?wait= of a GET of an intent.
const MaxWait = api.MaxWait

// server answers the relayer's HTTP routes. A submit records where its idempotency key lives
// in the index (claim) before it submits there, and a read looks it up first, so a repeat
// reaches its record whatever the keys are now.
type server struct {
	caller  api.Caller
	timeout time.Duration
	keys    *Keys
}

func newServer(caller api.Caller, timeout time.Duration, keys *Keys) *server {
	return &server{caller: caller, timeout: timeout, keys: keys}
}

func routes(caller api.Caller, cfg config.Config) []api.Route {
	o := Settings.Get(cfg)
	s := newServer(caller, cfg.RequestTimeout, o.keys)
	auth := func(h http.HandlerFunc) http.HandlerFunc { return api.Bearer(o.Token, "relayer", h) }
	return []api.Route{
		{Pattern: "POST /v1/relayers/{account_id}/intents", Handler: auth(s.submit)},
		{Pattern: "GET /v1/relayers/{account_id}/intents/{idempotency_key}", Handler: auth(s.get)},
		{Pattern: "GET /v1/relayers/{account_id}", Handler: auth(s.status)},
	}
}

// account returns the path's account and its configured keys; an account in no keys file is
// unknown_relayer.
func (s *server) account(w http.ResponseWriter, r *http.Request) (string, []near.PublicKey, bool) {
	account := r.PathValue("account_id")
	keys := s.keys.PublicKeys(account)
	if len(keys) == 0 {
		api.WriteError(w, actors.Errorf("unknown_relayer", "no relayer keys are configured for this account"))
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
		api.WriteError(w, err)
		return
	}
	body.IdempotencyKey = c.idem
	want, _ := Assign(c.idem, keys)
	var at Placement
	err = api.CallJSON(r.Context(), s.caller, s.timeout, IndexKindName, IndexID(account, c.idem), MethodClaim,
		ClaimRequest{IdempotencyKey: c.idem, RequestHash: c.requestHash, Key: want.String()}, &at)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	var out Submitted
	for attempt := 0; ; attempt++ {
		pk, perr := near.ParsePublicKey(at.Key)
		if perr != nil {
			api.WriteError(w, perr)
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
		api.WriteError(w, err)
		return
	}
	status := http.StatusCreated
	if out.Existed {
		status = http.StatusOK
	}
	api.WriteJSON(w, status, out.Intent)
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
			api.WriteError(w, err)
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
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	account, keys, ok := s.account(w, r)
	if !ok {
		return
	}
	out := RelayerStatus{AccountID: account, Keys: make([]KeyStatus, len(keys))}
	for i, pk := range keys {
		if err := api.CallJSON(r.Context(), s.caller, s.timeout, KindName, ActorID(account, pk), MethodStatus, struct{}{}, &out.Keys[i]); err != nil {
			api.WriteError(w, err)
			return
		}
	}
	api.WriteJSON(w, http.StatusOK, out)
}
