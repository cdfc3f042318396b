package api

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/device"
	"github.com/shardkeeper/shardkeeper/actors/oracle"
	"github.com/shardkeeper/shardkeeper/actors/servers"
	"github.com/shardkeeper/shardkeeper/config"
)

// Server holds what the domain handlers need: a way to reach actors and the configuration.
type Server struct {
	Caller Caller
	Config config.Config
}

// Kinds are the domain actor kinds, configured from cfg.
func Kinds(cfg config.Config) []actors.Kind {
	return []actors.Kind{
		device.Kind(device.Config{NonceTTL: cfg.AttestNonceTTL, MaxPending: cfg.MaxPendingPerDevice,
			MaxDevices: cfg.MaxDevices, DeviceTTL: cfg.DeviceTTL}),
		servers.Kind(servers.Config{TTL: cfg.ServerTTL, MaxServers: cfg.MaxServers}),
		oracle.Kind(oracle.Config{TTL: cfg.OracleNonceTTL}),
	}
}

// Register adds every domain endpoint of the contract to mux.
func Register(mux *http.ServeMux, caller Caller, cfg config.Config) {
	s := &Server{Caller: caller, Config: cfg}
	s.registerDevices(mux)
	s.registerServers(mux)
	s.registerOracle(mux)
}
