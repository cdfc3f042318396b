package device

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/names"
)

// defaultRegistry is the registry of the compatibility paths /attest/*.
const defaultRegistry = "default"

// server answers the registry's HTTP routes: one actor of kind KindName per registry name.
// Requests are validated here, so that a malformed one never reaches the actor (which
// validates again).
type server struct {
	caller actors.Caller
	codes  *api.Codes // the node's error codes, which the routes answer with
	cfg    config.Config
	names  *names.Enroller          // registry names, bounded by --max-registries
	admin  func(*http.Request) bool // whether a request carries the admin token
}

// routes are the registry's endpoints, the compatibility paths included.
func routes(env services.Env, cfg config.Config) []api.Route {
	caller := env.Caller
	s := &server{caller: caller, codes: env.Codes, cfg: cfg, names: &names.Enroller{Caller: caller, Kind: NamesKindName, Namespace: "all",
		What: "device registries", Max: cfg.MaxRegistries, Timeout: cfg.RequestTimeout}, admin: api.BearerCheck(cfg.AdminToken)}
	named := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h(w, r, r.PathValue("registry")) }
	}
	compat := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h(w, r, defaultRegistry) }
	}
	return []api.Route{
		{Pattern: "POST /v1/attest/{registry}/register", Handler: named(s.register)},
		{Pattern: "POST /v1/attest/{registry}/challenge", Handler: named(s.challenge)},
		{Pattern: "POST /v1/attest/{registry}/verify", Handler: named(s.verify)},
		{Pattern: "GET /v1/attest/{registry}/devices/{device_id}", Handler: s.get},
		{Pattern: "DELETE /v1/attest/{registry}/devices/{device_id}", Handler: api.Admin(cfg.AdminToken, s.delete), Admin: true},
		{Pattern: "POST /attest/register", Handler: compat(s.register)},
		{Pattern: "POST /attest/challenge", Handler: compat(s.challenge)},
		{Pattern: "POST /attest/verify", Handler: compat(s.verify)},
	}
}

// registered is the reply of a registration: 201 when new, 200 for a re-registration (a key
// rotation included).
type registered struct {
	DeviceID     string `json:"device_id"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
}

func (s *server) register(w http.ResponseWriter, r *http.Request, registry string) {
	var body Registration
	if !decodeBody(s, w, r, registry, &body) {
		return
	}
	if err := body.Validate(); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	if err := s.names.Enroll(r.Context(), registry); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	// The admin token replaces the proof of a key rotation. Any other Authorization is not
	// this endpoint's business: without the token, a rotation needs its proof.
	req := RegisterRequest{Registration: body, Admin: s.admin(r)}
	var out Registered
	if err := s.call(r, registry, MethodRegister, req, &out); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	api.WriteJSON(w, status, registered{DeviceID: out.DeviceID, RegisteredAt: out.RegisteredAt, LastSeen: out.LastSeen})
}

func (s *server) challenge(w http.ResponseWriter, r *http.Request, registry string) {
	var body ChallengeRequest
	if !decodeBody(s, w, r, registry, &body) {
		return
	}
	s.forward(w, r, registry, MethodChallenge, body) // Challenge
}

func (s *server) verify(w http.ResponseWriter, r *http.Request, registry string) {
	var body Verification
	if !decodeBody(s, w, r, registry, &body) {
		return
	}
	s.forward(w, r, registry, MethodVerify, body) // Verified
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	registry, ref, ok := s.deviceInPath(w, r)
	if !ok {
		return
	}
	s.forward(w, r, registry, MethodGet, ref) // Device
}

func (s *server) delete(w http.ResponseWriter, r *http.Request) {
	registry, ref, ok := s.deviceInPath(w, r)
	if !ok {
		return
	}
	if err := s.call(r, registry, MethodDelete, ref, nil); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// call sends one request to the registry's actor with the request deadline.
func (s *server) call(r *http.Request, registry, method string, in, out any) error {
	return api.CallJSON(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, registry, method, in, out)
}

// forward sends one request to the registry's actor and answers 200 with its reply as it
// stands.
func (s *server) forward(w http.ResponseWriter, r *http.Request, registry, method string, in any) {
	out, err := api.CallRaw(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, registry, method, in)
	if err != nil {
		s.codes.WriteError(w, err)
		return
	}
	api.WriteRawJSON(w, http.StatusOK, out)
}

// decodeBody checks the registry name (400 invalid_id), decodes the body into dst (413
// body_too_large, 400 invalid_request) and validates it. On failure it writes the error and
// returns false.
func decodeBody[T interface{ Validate() *actors.Error }](s *server, w http.ResponseWriter, r *http.Request, registry string, dst *T) bool {
	if !ident.Name(registry) {
		api.WriteAPIError(w, api.InvalidID("registry"))
		return false
	}
	if err := api.DecodeJSON(r, dst); err != nil {
		api.WriteAPIError(w, err)
		return false
	}
	if err := (*dst).Validate(); err != nil {
		s.codes.WriteError(w, err)
		return false
	}
	return true
}

// deviceInPath reads and checks {registry} and {device_id} (400 invalid_id). On failure it
// writes the error and returns false.
func (s *server) deviceInPath(w http.ResponseWriter, r *http.Request) (string, DeviceRef, bool) {
	registry, ref := r.PathValue("registry"), DeviceRef{DeviceID: r.PathValue("device_id")}
	if !ident.Name(registry) {
		api.WriteAPIError(w, api.InvalidID("registry"))
		return "", ref, false
	}
	if err := ref.Validate(); err != nil {
		s.codes.WriteError(w, err)
		return "", ref, false
	}
	return registry, ref, true
}
