package main

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
)

// Kinds are the actor kinds this binary serves.
func Kinds(cfg config.Config) []actors.Kind { return api.Kinds(cfg) }

// Routes registers the HTTP API of the kinds.
func Routes(cfg config.Config) func(*http.ServeMux, api.Caller) {
	return func(mux *http.ServeMux, c api.Caller) { api.Register(mux, c, cfg) }
}
