package api

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors/oracle"
)

// registerOracle adds the nonce oracle endpoints (API.md "Nonce oracle"). Nonces are spread
// over oracle.Shards actors of kind oracle.KindName: an issue goes to a random shard and a
// nonce names its shard, so a consume or read goes straight to it (see package oracle).
func (s *Server) registerOracle(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/nonces", s.issueNonce)
	mux.HandleFunc("POST /v1/nonces/{nonce}/consume", s.consumeNonce)
	mux.HandleFunc("GET /v1/nonces/{nonce}", s.getNonce)
}

// issueNonceBody is the body of POST /v1/nonces.
type issueNonceBody struct {
	OrgID string `json:"org_id"`
}

// consumeNonceBody is the body of POST /v1/nonces/{nonce}/consume.
type consumeNonceBody struct {
	OrgID     string `json:"org_id"`
	RequestID string `json:"request_id"`
}

func (s *Server) issueNonce(w http.ResponseWriter, r *http.Request) {
	var body issueNonceBody
	if err := DecodeJSON(r, &body); err != nil {
		WriteAPIError(w, err)
		return
	}
	if err := oracle.ValidateOrg(body.OrgID); err != nil {
		WriteError(w, err)
		return
	}
	out, err := CallRaw(r.Context(), s.Caller, s.Config.RequestTimeout, oracle.KindName, s.issueShard(),
		oracle.MethodIssue, oracle.IssueRequest{OrgID: body.OrgID})
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteRawJSON(w, http.StatusCreated, out) // oracle.Issued
}

func (s *Server) consumeNonce(w http.ResponseWriter, r *http.Request) {
	var body consumeNonceBody
	if err := DecodeJSON(r, &body); err != nil {
		WriteAPIError(w, err)
		return
	}
	if err := oracle.ValidateOrg(body.OrgID); err != nil {
		WriteError(w, err)
		return
	}
	if err := oracle.ValidateRequestID(body.RequestID); err != nil {
		WriteError(w, err)
		return
	}
	nonce := r.PathValue("nonce")
	shard, ok := nonceShard(nonce)
	if !ok {
		WriteAPIError(w, unknownNonce())
		return
	}
	out, err := CallRaw(r.Context(), s.Caller, s.Config.RequestTimeout, oracle.KindName, shard,
		oracle.MethodConsume, oracle.ConsumeRequest{Nonce: nonce, OrgID: body.OrgID, RequestID: body.RequestID})
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteRawJSON(w, http.StatusOK, out) // oracle.Consumed
}

func (s *Server) getNonce(w http.ResponseWriter, r *http.Request) {
	nonce := r.PathValue("nonce")
	shard, ok := nonceShard(nonce)
	if !ok {
		WriteAPIError(w, unknownNonce())
		return
	}
	out, err := CallRaw(r.Context(), s.Caller, s.Config.RequestTimeout, oracle.KindName, shard,
		oracle.MethodGet, oracle.GetRequest{Nonce: nonce})
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteRawJSON(w, http.StatusOK, out) // oracle.Info
}

// localShardTries bounds the random shards issueShard tries for one led here: with this node
// leading a third of the partitions, 8 tries find one 96% of the time.
const localShardTries = 8

// issueShard picks the shard of a new nonce: at random, preferring a shard whose partition is
// led by this node so that the issue needs no forwarding (any shard will do: the nonce names
// it). Behind a load balancer the nonces still spread over every partition.
func (s *Server) issueShard() string {
	lc, ok := s.Caller.(LocalCaller)
	shard := oracle.RandomShard()
	for i := 1; ok && i < localShardTries && !lc.Local(oracle.KindName, shard); i++ {
		shard = oracle.RandomShard()
	}
	return shard
}

// nonceShard returns the shard of an oracle nonce, or false when the string cannot be a nonce
// the oracle issued: such a nonce is unknown without asking any actor.
func nonceShard(nonce string) (string, bool) {
	if !ValidNonce(nonce) {
		return "", false
	}
	return oracle.ShardOf(nonce)
}

func unknownNonce() *Error {
	return Errorf(http.StatusNotFound, "unknown_nonce", "no such nonce")
}
