package oracle

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ident"
)

// server answers the oracle's HTTP routes. Nonces are spread over Shards actors of kind
// KindName: an issue goes to a random shard and a nonce names its shard, so a consume or read
// goes straight to it.
type server struct {
	caller api.Caller
	cfg    config.Config
}

func routes(caller api.Caller, cfg config.Config) []api.Route {
	s := &server{caller: caller, cfg: cfg}
	return []api.Route{
		{Pattern: "POST /v1/nonces", Handler: s.issue},
		{Pattern: "POST /v1/nonces/{nonce}/consume", Handler: s.consume},
		{Pattern: "GET /v1/nonces/{nonce}", Handler: s.get},
	}
}

// consumeBody is the body of POST /v1/nonces/{nonce}/consume.
type consumeBody struct {
	OrgID     string `json:"org_id"`
	RequestID string `json:"request_id"`
}

func (s *server) issue(w http.ResponseWriter, r *http.Request) {
	var body IssueRequest // {org_id}
	if err := api.DecodeJSON(r, &body); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	if err := ValidateOrg(body.OrgID); err != nil {
		api.WriteError(w, err)
		return
	}
	out, err := api.CallRaw(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, s.issueShard(), MethodIssue, body)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteRawJSON(w, http.StatusCreated, out) // Issued
}

func (s *server) consume(w http.ResponseWriter, r *http.Request) {
	var body consumeBody
	if err := api.DecodeJSON(r, &body); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	if err := ValidateOrg(body.OrgID); err != nil {
		api.WriteError(w, err)
		return
	}
	if err := ValidateRequestID(body.RequestID); err != nil {
		api.WriteError(w, err)
		return
	}
	nonce := r.PathValue("nonce")
	shard, ok := nonceShard(nonce)
	if !ok {
		api.WriteAPIError(w, unknownNonce())
		return
	}
	out, err := api.CallRaw(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, shard,
		MethodConsume, ConsumeRequest{Nonce: nonce, OrgID: body.OrgID, RequestID: body.RequestID})
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteRawJSON(w, http.StatusOK, out) // Consumed
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	nonce := r.PathValue("nonce")
	shard, ok := nonceShard(nonce)
	if !ok {
		api.WriteAPIError(w, unknownNonce())
		return
	}
	out, err := api.CallRaw(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, shard, MethodGet, GetRequest{Nonce: nonce})
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteRawJSON(w, http.StatusOK, out) // Info
}

// localShardTries bounds the random shards issueShard tries for one led here. A try is a hash
// and a map lookup; a forwarded issue costs a gRPC round trip, a hundred times more. With this
// node leading a third of the partitions, 64 tries all miss about once in 10^11 issues; leading
// a sixteenth, 1.6% of the time.
const localShardTries = 64

// issueShard picks the shard of a new nonce: at random, preferring a shard whose partition is
// led by this node so that the issue needs no forwarding (any shard will do: the nonce names
// it). Behind a load balancer the nonces still spread over every partition.
func (s *server) issueShard() string {
	lc, ok := s.caller.(api.LocalCaller)
	shard := RandomShard()
	for i := 1; ok && i < localShardTries && !lc.Local(KindName, shard); i++ {
		shard = RandomShard()
	}
	return shard
}

// nonceShard returns the shard of a nonce, or false when the string cannot be a nonce the
// oracle issued: such a nonce is unknown without asking any actor.
func nonceShard(nonce string) (string, bool) {
	if !ident.Long(nonce) {
		return "", false
	}
	return ShardOf(nonce)
}

func unknownNonce() *api.Error {
	return api.Errorf(http.StatusNotFound, "unknown_nonce", "no such nonce")
}
