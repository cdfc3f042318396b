// Package services describes a service of the API — a registry, the nonce oracle, the
// relayer, the attestation chain — as one value: its settings, its actor kinds, its HTTP routes
// and its error codes. Each service has a home of its own below this folder
// (services/oracle, …), and the binary serves those services/all lists; docs/services.md says
// how one is laid out.
package services

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
)

// Service is one service of the API.
type Service struct {
	// Name names the service in errors, e.g. "device".
	Name string
	// Settings are the service's options (nil: none): a *config.Section of the service's own typed
	// struct, which config.Load parses like the core options.
	Settings config.Group
	// Kinds builds the service's actor kinds from the configuration (its section included) and
	// what the node gives them (Env).
	Kinds func(cfg config.Config, env Env) []actors.Kind
	// Routes builds the service's HTTP routes: env.Caller reaches any actor of the cluster and
	// env.Registerer takes the routes' metrics; cfg holds the core settings (request timeout,
	// admin token) and the service's.
	Routes func(env Env, cfg config.Config) []api.Route
	// Codes maps the error codes the service's actors and routes answer to HTTP statuses.
	Codes map[string]int
	// Figures are what the operator's dashboard (GET /ui) shows of the service, each the
	// sum of one of the service's metrics on the node.
	Figures []Figure
}

// Figure is one line of the operator's dashboard: Label, and the sum over the series of the
// gauge or counter Metric on the node. A figure whose metric has no series yet is left out.
type Figure struct {
	Label, Metric string
}

// Figures lists the dashboard figures of ss.
func Figures(ss []Service) []Figure {
	var out []Figure
	for _, s := range ss {
		out = append(out, s.Figures...)
	}
	return out
}

// Settings lists the settings of ss, for config.Load.
func Settings(ss []Service) []config.Group {
	var out []config.Group
	for _, d := range ss {
		if d.Settings != nil {
			out = append(out, d.Settings)
		}
	}
	return out
}

// Codes is the table of error codes of a node serving ss: the core codes and every service's.
// Two services answering one code with different statuses are an error naming the second.
func Codes(ss []Service) (*api.Codes, error) {
	codes := api.CoreCodes()
	for _, s := range ss {
		c, err := codes.With(s.Codes)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", s.Name, err)
		}
		codes = c
	}
	return codes, nil
}

// Env is what a node gives the actor kinds and the routes of its services.
type Env struct {
	// Caller reaches any actor of the cluster once the node serves: for effects and HTTP
	// routes, never from an actor's handler (a handler waiting on another actor holds its
	// mailbox). Nil in tests of kinds alone.
	Caller actors.Caller
	// Registerer takes the service's own metrics (the node's /metrics). Service.Kinds is called
	// once per node; Kinds gives a registry of its own when nil.
	Registerer prometheus.Registerer
	// Codes maps the error codes of every service the node serves to HTTP statuses: routes
	// write their errors with it (Codes.WriteError). Nil knows the core codes only; kinds
	// are given none (they answer outcomes, not statuses).
	Codes *api.Codes
}

// Kinds lists the actor kinds of ss, configured from cfg.
func Kinds(ss []Service, cfg config.Config, env Env) []actors.Kind {
	if env.Registerer == nil {
		env.Registerer = prometheus.NewRegistry()
	}
	var out []actors.Kind
	for _, d := range ss {
		if d.Kinds != nil {
			out = append(out, d.Kinds(cfg, env)...)
		}
	}
	return out
}

// Routes lists the HTTP routes of ss; with env.Codes nil, they write errors knowing the
// codes of ss.
func Routes(ss []Service, env Env, cfg config.Config) []api.Route {
	if env.Registerer == nil {
		env.Registerer = prometheus.NewRegistry()
	}
	if env.Codes == nil {
		env.Codes, _ = Codes(ss) // nil on a conflict, which NewMux reports
	}
	var out []api.Route
	for _, d := range ss {
		if d.Routes != nil {
			out = append(out, d.Routes(env, cfg)...)
		}
	}
	return out
}

// Register registers c on reg, or returns the collector of the same description already
// there (a second node of one registry, in tests, shares it).
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // two instruments of one name and different shapes: a programming error
	}
	return c
}
