package main

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
)

// Kinds are the actor kinds this binary serves. The domain kinds (device registry, server
// registry, nonce oracle) arrive with their own packages under actors/.
func Kinds(config.Config) []actors.Kind { return nil }

// Routes registers the HTTP API of the kinds.
func Routes(config.Config) func(*http.ServeMux, *actors.Runtime) { return nil }
