package oracle

import (
	"errors"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/services"
)

// server answers the oracle's HTTP routes. Nonces are spread over Shards actors of kind
// KindName: an issue goes to a random shard and a nonce names its shard, so a consume or read
// goes straight to it.
type server struct {
	caller actors.Caller
	codes  *api.Codes // the node's error codes, which the routes answer with
	cfg    config.Config
}

func routes(env services.Env, cfg config.Config) []api.Route {
	s := &server{caller: env.Caller, codes: env.Codes, cfg: cfg}
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

// issueBody is the body of POST /v1/nonces: the client names its organisation, nothing else
// (not IssueRequest, which the shard's protocol may extend).
type issueBody struct {
	OrgID string `json:"org_id"`
}

// issueTries bounds the shards one issue tries when each refuses the organisation for its
// share of --oracle-max-outstanding (too_many_outstanding): an organisation whose nonces sit
// unevenly still finds room elsewhere, and one truly at its bound is refused after this many
// calls that write nothing.
const issueTries = 4

func (s *server) issue(w http.ResponseWriter, r *http.Request) {
	var in issueBody
	if err := api.DecodeJSON(r, &in); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	if err := ValidateOrg(in.OrgID); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	body := IssueRequest(in)
	// A refusal for the organisation's share writes nothing: another shard may have room.
	var tried [issueTries]string
	var err error
	for i := range issueTries {
		shard := s.issueShard(tried[:i])
		if shard == "" {
			break // pinned by a test to fewer shards, all tried
		}
		tried[i] = shard
		var out []byte
		if out, err = api.CallRaw(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, shard, MethodIssue, body); err == nil {
			api.WriteRawJSON(w, http.StatusCreated, out) // Issued
			return
		}
		if !tooManyOutstanding(err) {
			break
		}
	}
	s.codes.WriteError(w, err)
}

// tooManyOutstanding reports whether err is a shard's refusal for the organisation's share.
func tooManyOutstanding(err error) bool {
	var e *actors.Error
	return errors.As(err, &e) && e.Code == "too_many_outstanding"
}

func (s *server) consume(w http.ResponseWriter, r *http.Request) {
	var body consumeBody
	if err := api.DecodeJSON(r, &body); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	if err := ValidateOrg(body.OrgID); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	if err := ValidateRequestID(body.RequestID); err != nil {
		s.codes.WriteError(w, err)
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
		s.codes.WriteError(w, err)
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
		s.codes.WriteError(w, err)
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
//
// After refusals (tried holds the shards that refused) it picks any shard not tried, local or
// not: an organisation whose requests all reach one node fills that node's shards first, and
// only the others have room then. Those tries cost a forward, but only near the bound.
func (s *server) issueShard(tried []string) string {
	if p := pinnedShards.Load(); p != nil {
		return pinnedShard(*p, tried)
	}
	shard := RandomShard()
	if len(tried) > 0 {
		for slices.Contains(tried, shard) {
			shard = RandomShard()
		}
		return shard
	}
	lc, ok := s.caller.(api.LocalCaller)
	for i := 1; ok && i < localShardTries && !lc.Local(KindName, shard); i++ {
		shard = RandomShard()
	}
	return shard
}

// pinnedShards, when set (by tests only), holds the only shards issues go to.
var pinnedShards atomic.Pointer[[]string]

// pinnedShard is the first of shards not tried ("" when all were).
func pinnedShard(shards, tried []string) string {
	for _, shard := range shards {
		if !slices.Contains(tried, shard) {
			return shard
		}
	}
	return ""
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
