package servers

import (
	"encoding/json"
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/names"
)

// defaultRegistry is the registry of the compatibility paths /servers.
const defaultRegistry = "default"

// server answers the registry's HTTP routes: one actor of kind KindName per registry name.
type server struct {
	caller actors.Caller
	codes  *api.Codes // the node's error codes, which the routes answer with
	cfg    config.Config
	names  *names.Enroller // registry names, bounded by --max-registries
}

// routes are the registry's endpoints, the compatibility paths included.
func routes(env services.Env, cfg config.Config) []api.Route {
	caller := env.Caller
	s := &server{caller: caller, codes: env.Codes, cfg: cfg, names: &names.Enroller{Caller: caller, Kind: NamesKindName, Namespace: "all",
		What: "server registries", Max: cfg.MaxRegistries, Timeout: cfg.RequestTimeout}}
	// With --servers-token-file, registrations and heartbeats need that token (the admin
	// delete keeps the admin token's); reads stay open.
	write := func(h http.HandlerFunc) http.HandlerFunc { return h }
	if t := Settings.Get(cfg).token; t != "" {
		write = func(h http.HandlerFunc) http.HandlerFunc { return api.Bearer(t, "servers", h) }
	}
	return []api.Route{
		{Pattern: "PUT /v1/servers/{registry}/{server_id}", Handler: write(s.put)},
		{Pattern: "GET /v1/servers/{registry}", Handler: func(w http.ResponseWriter, r *http.Request) {
			s.list(w, r, r.PathValue("registry"))
		}},
		{Pattern: "DELETE /v1/servers/{registry}/{server_id}", Handler: api.Admin(cfg.AdminToken, s.delete), Admin: true},
		{Pattern: "GET /servers", Handler: func(w http.ResponseWriter, r *http.Request) { s.list(w, r, defaultRegistry) }},
		{Pattern: "POST /servers", Handler: write(s.postLegacy)},
	}
}

// heartbeat is the body of PUT /v1/servers/{registry}/{server_id}.
type heartbeat struct {
	Address string          `json:"address"`
	Region  string          `json:"region"`
	Meta    json.RawMessage `json:"meta"`
}

// legacyHeartbeat is the body of POST /servers, with the seed's field name serverId.
type legacyHeartbeat struct {
	ServerID string          `json:"serverId"`
	Address  string          `json:"address"`
	Region   string          `json:"region"`
	Meta     json.RawMessage `json:"meta"`
}

// registered is the reply of a registration: 201 when new, 200 for a heartbeat.
type registered struct {
	ServerID     string `json:"server_id"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
}

// put registers a server or heartbeats it; either way its address, region and meta become
// the body's (an absent region or meta clears the stored one).
func (s *server) put(w http.ResponseWriter, r *http.Request) {
	registry, id, ok := serverInPath(w, r)
	if !ok {
		return
	}
	var body heartbeat
	if err := api.DecodeJSON(r, &body); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	s.register(w, r, registry, Registration{ServerID: id, Address: body.Address, Region: body.Region, Meta: body.Meta})
}

func (s *server) postLegacy(w http.ResponseWriter, r *http.Request) {
	var body legacyHeartbeat
	if err := api.DecodeJSON(r, &body); err != nil {
		api.WriteAPIError(w, err)
		return
	}
	if body.ServerID == "" {
		api.WriteAPIError(w, api.Missing("serverId"))
		return
	}
	if !ident.Name(body.ServerID) {
		api.WriteAPIError(w, api.InvalidID("serverId"))
		return
	}
	s.register(w, r, defaultRegistry, Registration(body))
}

// register validates reg at the edge (so that a bad body never reaches the actor) and sends
// it to the registry's actor.
func (s *server) register(w http.ResponseWriter, r *http.Request, registry string, reg Registration) {
	if err := reg.Validate(); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	if err := s.names.Enroll(r.Context(), registry); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	var out Registered
	if err := api.CallJSON(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, registry, MethodRegister, reg, &out); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	api.WriteJSON(w, status, registered{ServerID: out.ServerID, RegisteredAt: out.RegisteredAt, LastSeen: out.LastSeen})
}

func (s *server) list(w http.ResponseWriter, r *http.Request, registry string) {
	if !ident.Name(registry) {
		api.WriteAPIError(w, api.InvalidID("registry"))
		return
	}
	out, err := api.CallRaw(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, registry, MethodList, struct{}{})
	if err != nil {
		s.codes.WriteError(w, err)
		return
	}
	api.WriteRawJSON(w, http.StatusOK, out) // List
}

func (s *server) delete(w http.ResponseWriter, r *http.Request) {
	registry, id, ok := serverInPath(w, r)
	if !ok {
		return
	}
	if err := api.CallJSON(r.Context(), s.caller, s.cfg.RequestTimeout, KindName, registry, MethodDelete,
		Deletion{ServerID: id}, nil); err != nil {
		s.codes.WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serverInPath reads and checks {registry} and {server_id} (400 invalid_id). On failure it
// writes the error and returns false.
func serverInPath(w http.ResponseWriter, r *http.Request) (string, string, bool) {
	registry, id := r.PathValue("registry"), r.PathValue("server_id")
	if !ident.Name(registry) {
		api.WriteAPIError(w, api.InvalidID("registry"))
		return "", "", false
	}
	if !ident.Name(id) {
		api.WriteAPIError(w, api.InvalidID("server_id"))
		return "", "", false
	}
	return registry, id, true
}
