package chain

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/names"
)

type server struct {
	caller actors.Caller
	codes  *api.Codes // the node's error codes, which the routes answer with
	cfg    config.Config
	names  *names.Enroller // chain names, bounded by --max-registries
}

func routes(env services.Env, cfg config.Config) []api.Route {
	caller := env.Caller
	o := Settings.Get(cfg)
	s := &server{caller: caller, codes: env.Codes, cfg: cfg, names: &names.Enroller{Caller: caller, Kind: NamesKindName, Namespace: "all",
		What: "chains", Max: cfg.MaxRegistries, Timeout: cfg.RequestTimeout}}
	write := func(h http.HandlerFunc) http.HandlerFunc {
		if o.wallet == nil {
			return func(w http.ResponseWriter, _ *http.Request) {
				s.codes.WriteError(w, actors.Errorf("chain_disabled", "chain writes are disabled: no --arweave-wallet and --arweave-gateway configured"))
			}
		}
		return api.Bearer(o.Token, "chain", h)
	}
	return []api.Route{
		{Pattern: "POST /v1/chains/{chain}/events", Handler: write(s.append)},
		{Pattern: "GET /v1/chains/{chain}/head", Handler: s.read(MethodHead, func(*http.Request) ([]byte, bool) { return nil, true })},
		{Pattern: "GET /v1/chains/{chain}/events/{seq}", Handler: s.read(MethodEvent, func(r *http.Request) ([]byte, bool) {
			seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
			return []byte(strconv.FormatInt(seq, 10)), err == nil && seq >= 1
		})},
		{Pattern: "GET /v1/chains/{chain}/entities/{entity_id}", Handler: s.read(MethodEntity, func(r *http.Request) ([]byte, bool) {
			e := r.PathValue("entity_id")
			return []byte(e), entityPattern.MatchString(e)
		})},
		{Pattern: "GET /v1/chains/{chain}/checkpoint", Handler: s.checkpoint},
		{Pattern: "GET /v1/chains/{chain}/proof/inclusion", Handler: s.read(MethodProof, func(r *http.Request) ([]byte, bool) {
			seq, err1 := strconv.ParseInt(r.URL.Query().Get("seq"), 10, 64)
			size, err2 := strconv.ParseInt(r.URL.Query().Get("size"), 10, 64)
			b, _ := json.Marshal(Proof{Seq: seq, Size: size})
			return b, err1 == nil && err2 == nil && seq >= 1 && size >= 1
		})},
		{Pattern: "GET /v1/chains/{chain}/proof/consistency", Handler: s.read(MethodProof, func(r *http.Request) ([]byte, bool) {
			from, err1 := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
			to, err2 := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64)
			b, _ := json.Marshal(Proof{From: from, To: to})
			return b, err1 == nil && err2 == nil && from >= 1 && to >= 1
		})},
		{Pattern: "POST /v1/chains/{chain}/retry", Handler: api.Admin(cfg.AdminToken, s.read(MethodRetry, func(*http.Request) ([]byte, bool) { return nil, true })), Admin: true},
		{Pattern: "GET /v1/chains/{chain}/entities/{entity_id}/versions/{ver}", Handler: s.read(MethodVersion, func(r *http.Request) ([]byte, bool) {
			e := r.PathValue("entity_id")
			ver, err := strconv.ParseInt(r.PathValue("ver"), 10, 64)
			return []byte(e + "\x00" + strconv.FormatInt(ver, 10)), entityPattern.MatchString(e) && err == nil && ver >= 1
		})},
	}
}

// chainOf returns the path's chain name, answering invalid_id when it is not a name.
func chainOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	c := r.PathValue("chain")
	if !ident.Name(c) {
		api.WriteAPIError(w, api.InvalidID("chain"))
		return "", false
	}
	return c, true
}

func (s *server) append(w http.ResponseWriter, r *http.Request) {
	chain, ok := chainOf(w, r)
	if !ok {
		return
	}
	var e Event
	if err := api.DecodeJSON(r, &e); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	if err := e.Normalize(); err != nil { // answered before reaching the actor
		s.codes.WriteError(w, err)
		return
	}
	// Only writes enroll: a read of a chain never written stores nothing.
	if err := s.names.Enroll(r.Context(), chain); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	var out Appended
	if err := api.CallJSON(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, chain, MethodAppend, e, &out); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	api.WriteJSON(w, status, map[string]any{"chain": out.Chain, "entity_id": out.EntityID, "ver": out.Ver, "cid": out.CID,
		"status": out.Status, "created_at": out.CreatedAt})
}

// read answers a read of the chain actor: arg builds the request body from the path, or
// reports the path invalid (invalid_id).
func (s *server) read(method string, arg func(*http.Request) ([]byte, bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		chain, ok := chainOf(w, r)
		if !ok {
			return
		}
		body, ok := arg(r)
		if !ok {
			api.WriteAPIError(w, api.InvalidID("path"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		out, err := s.caller.Call(ctx, KindName, chain, actors.Request{Method: method, Body: body})
		if err != nil {
			s.codes.WriteError(w, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, json.RawMessage(out))
	}
}

// checkpoint answers the chain's latest checkpoint, a signed note (text/plain).
func (s *server) checkpoint(w http.ResponseWriter, r *http.Request) {
	chain, ok := chainOf(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	out, err := s.caller.Call(ctx, KindName, chain, actors.Request{Method: MethodCheckpoint})
	if err != nil {
		s.codes.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(out)
}
