package node

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ops"
	"github.com/shardkeeper/shardkeeper/services"
)

// NewMux builds the HTTP mux of a node serving ss: the operational routes (ops.Register and
// GET /openapi.yaml) and every service's routes, which write their errors knowing every
// service's codes (services.Env.Codes). Two services answering one code with different
// statuses, or registering conflicting routes, are errors naming the service.
func NewMux(view ops.ClusterView, reg *prometheus.Registry, ss []services.Service, caller actors.Caller, cfg config.Config) (*Mux, error) {
	mux := &Mux{ServeMux: http.NewServeMux(), operator: map[string]bool{}}
	ops.Register(mux.ServeMux, view, reg, cfg.AdminToken, services.Figures(ss))
	codes, err := services.Codes(ss)
	if err != nil {
		return nil, err
	}
	env := services.Env{Caller: caller, Registerer: reg, Codes: codes}
	for _, p := range ops.AdminPatterns {
		mux.operator[p] = true
	}
	if err := handle(mux.ServeMux, api.OpenAPIRoute()); err != nil {
		return nil, err
	}
	for _, s := range ss {
		if s.Routes == nil {
			continue
		}
		for _, r := range s.Routes(env, cfg) {
			if err := handle(mux.ServeMux, r); err != nil {
				return nil, fmt.Errorf("service %s: %w", s.Name, err)
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
