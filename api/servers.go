package api

import (
	"encoding/json"
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors/servers"
)

// defaultServerRegistry is the registry of the compatibility paths /servers.
const defaultServerRegistry = "default"

// registerServers adds the server registry endpoints (API.md "Server registry"): one actor
// of kind servers.KindName per registry name.
func (s *Server) registerServers(mux *http.ServeMux) {
	mux.HandleFunc("PUT /v1/servers/{registry}/{server_id}", s.putServer)
	mux.HandleFunc("GET /v1/servers/{registry}", func(w http.ResponseWriter, r *http.Request) {
		s.listServers(w, r, r.PathValue("registry"))
	})
	mux.HandleFunc("DELETE /v1/servers/{registry}/{server_id}", Admin(s.Config.AdminToken, s.deleteServer))
	mux.HandleFunc("GET /servers", func(w http.ResponseWriter, r *http.Request) {
		s.listServers(w, r, defaultServerRegistry)
	})
	mux.HandleFunc("POST /servers", s.postLegacyServer)
}

// serverHeartbeat is the body of PUT /v1/servers/{registry}/{server_id}.
type serverHeartbeat struct {
	Address string          `json:"address"`
	Region  string          `json:"region"`
	Meta    json.RawMessage `json:"meta"`
}

// legacyServerHeartbeat is the body of POST /servers, with the seed's field name serverId.
type legacyServerHeartbeat struct {
	ServerID string          `json:"serverId"`
	Address  string          `json:"address"`
	Region   string          `json:"region"`
	Meta     json.RawMessage `json:"meta"`
}

// serverRegistered is the reply of a registration: 201 when new, 200 for a heartbeat.
type serverRegistered struct {
	ServerID     string `json:"server_id"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
}

func (s *Server) putServer(w http.ResponseWriter, r *http.Request) {
	registry, id := r.PathValue("registry"), r.PathValue("server_id")
	if !ValidName(registry) {
		WriteAPIError(w, InvalidID("registry", registry))
		return
	}
	if !ValidName(id) {
		WriteAPIError(w, InvalidID("server_id", id))
		return
	}
	var body serverHeartbeat
	if err := DecodeJSON(r, &body); err != nil {
		WriteAPIError(w, err)
		return
	}
	s.registerServer(w, r, registry, servers.Registration{ServerID: id, Address: body.Address,
		Region: body.Region, Meta: body.Meta})
}

func (s *Server) postLegacyServer(w http.ResponseWriter, r *http.Request) {
	var body legacyServerHeartbeat
	if err := DecodeJSON(r, &body); err != nil {
		WriteAPIError(w, err)
		return
	}
	if body.ServerID == "" {
		WriteAPIError(w, Missing("serverId"))
		return
	}
	if !ValidName(body.ServerID) {
		WriteAPIError(w, InvalidID("serverId", body.ServerID))
		return
	}
	s.registerServer(w, r, defaultServerRegistry, servers.Registration{ServerID: body.ServerID,
		Address: body.Address, Region: body.Region, Meta: body.Meta})
}

// registerServer validates reg at the edge (so that a bad body never reaches the actor) and
// sends it to the registry's actor.
func (s *Server) registerServer(w http.ResponseWriter, r *http.Request, registry string, reg servers.Registration) {
	if err := reg.Validate(); err != nil {
		WriteError(w, err)
		return
	}
	var out servers.Registered
	if err := CallJSON(r.Context(), s.Caller, s.Config.RequestTimeout, servers.KindName, registry,
		servers.MethodRegister, reg, &out); err != nil {
		WriteError(w, err)
		return
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	WriteJSON(w, status, serverRegistered{ServerID: out.ServerID, RegisteredAt: out.RegisteredAt, LastSeen: out.LastSeen})
}

func (s *Server) listServers(w http.ResponseWriter, r *http.Request, registry string) {
	if !ValidName(registry) {
		WriteAPIError(w, InvalidID("registry", registry))
		return
	}
	out, err := CallRaw(r.Context(), s.Caller, s.Config.RequestTimeout, servers.KindName, registry,
		servers.MethodList, struct{}{})
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteRawJSON(w, http.StatusOK, out) // servers.List
}

func (s *Server) deleteServer(w http.ResponseWriter, r *http.Request) {
	registry, id := r.PathValue("registry"), r.PathValue("server_id")
	if !ValidName(registry) {
		WriteAPIError(w, InvalidID("registry", registry))
		return
	}
	if !ValidName(id) {
		WriteAPIError(w, InvalidID("server_id", id))
		return
	}
	if err := CallJSON(r.Context(), s.Caller, s.Config.RequestTimeout, servers.KindName, registry,
		servers.MethodDelete, servers.Deletion{ServerID: id}, nil); err != nil {
		WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
