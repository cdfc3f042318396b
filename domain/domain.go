// Package domain describes a domain of the API — a registry, the nonce oracle, a relayer — as
// one value: its settings, its actor kinds, its HTTP routes and its error codes. A binary serves
// the domains it lists (see package domains); docs/domains.md says how one is laid out.
package domain

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
)

// Domain is one domain of the API.
type Domain struct {
	// Name names the domain in errors, e.g. "device".
	Name string
	// Settings are the domain's options (nil: none): a *config.Section of the domain's own typed
	// struct, which config.Load parses like the core options.
	Settings config.Group
	// Kinds builds the domain's actor kinds from the configuration (its section included) and
	// what the node gives them (Env).
	Kinds func(cfg config.Config, env Env) []actors.Kind
	// Routes builds the domain's HTTP routes: env.Caller reaches any actor of the cluster and
	// env.Registerer takes the routes' metrics; cfg holds the core settings (request timeout,
	// admin token) and the domain's.
	Routes func(env Env, cfg config.Config) []api.Route
	// Codes maps the error codes the domain's actors and routes answer to HTTP statuses.
	Codes map[string]int
}

// Settings lists the settings of ds, for config.Load.
func Settings(ds []Domain) []config.Group {
	var out []config.Group
	for _, d := range ds {
		if d.Settings != nil {
			out = append(out, d.Settings)
		}
	}
	return out
}

// Env is what a node gives the actor kinds of its domains.
type Env struct {
	// Caller reaches any actor of the cluster once the node serves: for effects and HTTP
	// routes, never from an actor's handler (a handler waiting on another actor holds its
	// mailbox). Nil in tests of kinds alone.
	Caller actors.Caller
	// Registerer takes the domain's own metrics (the node's /metrics). Domain.Kinds is called
	// once per node; Kinds gives a registry of its own when nil.
	Registerer prometheus.Registerer
	// Codes maps the error codes of every domain the node serves to HTTP statuses: routes
	// write their errors with it (Codes.WriteError). Nil knows the core codes only.
	Codes *api.Codes
}

// Kinds lists the actor kinds of ds, configured from cfg.
func Kinds(ds []Domain, cfg config.Config, env Env) []actors.Kind {
	if env.Registerer == nil {
		env.Registerer = prometheus.NewRegistry()
	}
	var out []actors.Kind
	for _, d := range ds {
		if d.Kinds != nil {
			out = append(out, d.Kinds(cfg, env)...)
		}
	}
	return out
}

// Routes lists the HTTP routes of ds.
func Routes(ds []Domain, env Env, cfg config.Config) []api.Route {
	if env.Registerer == nil {
		env.Registerer = prometheus.NewRegistry()
	}
	var out []api.Route
	for _, d := range ds {
		if d.Routes != nil {
			out = append(out, d.Routes(env, cfg)...)
		}
	}
	return out
}

// NewMux builds the HTTP mux of a node serving ds: the operational routes (api.RegisterOps and
// GET /openapi.yaml) and every domain's routes, which write their errors knowing every
// domain's codes (Env.Codes). Two domains answering one code with different statuses, or registering
// conflicting routes, are errors naming the domain.
func NewMux(view api.ClusterView, reg *prometheus.Registry, ds []Domain, caller actors.Caller, cfg config.Config) (*Mux, error) {
	mux := &Mux{ServeMux: http.NewServeMux(), operator: map[string]bool{}}
	api.RegisterOps(mux.ServeMux, view, reg, cfg.AdminToken)
	env := Env{Caller: caller, Registerer: reg, Codes: api.CoreCodes()}
	for _, d := range ds {
		codes, err := env.Codes.With(d.Codes)
		if err != nil {
			return nil, fmt.Errorf("domain %s: %w", d.Name, err)
		}
		env.Codes = codes
	}
	for _, p := range api.OperatorPatterns {
		mux.operator[p] = true
	}
	if err := handle(mux.ServeMux, api.OpenAPIRoute()); err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Routes == nil {
			continue
		}
		for _, r := range d.Routes(env, cfg) {
			if err := handle(mux.ServeMux, r); err != nil {
				return nil, fmt.Errorf("domain %s: %w", d.Name, err)
			}
			if r.Admin {
				mux.operator[r.Pattern] = true
			}
		}
	}
	return mux, nil
}

// Mux is the HTTP mux of a node: every route, served on one listener; or split, with
// --admin-addr, between Public and Admin.
type Mux struct {
	*http.ServeMux
	operator map[string]bool // the patterns of the admin listener (besides the health checks)
}

// Public serves every route but the operator's (metrics, the cluster view, admin routes),
// which it answers 404 not_found as if they did not exist.
func (m *Mux) Public() http.Handler { return m.only(func(p string) bool { return !m.operator[p] }) }

// Admin serves the operator's routes and the health checks; anything else is 404 not_found.
func (m *Mux) Admin() http.Handler {
	return m.only(func(p string) bool { return m.operator[p] || p == "GET /healthz" || p == "GET /readyz" })
}

func (m *Mux) only(serve func(pattern string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := m.Handler(r); pattern != "" && !serve(pattern) {
			api.WriteAPIError(w, api.Errorf(http.StatusNotFound, "not_found", "no such route on this listener"))
			return
		}
		m.ServeHTTP(w, r)
	})
}

// handle registers r on mux; the mux panics on a malformed or conflicting pattern, which is
// returned as an error.
func handle(mux *http.ServeMux, r api.Route) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route %q: %v", r.Pattern, p)
		}
	}()
	mux.Handle(r.Pattern, r.Handler)
	return nil
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
