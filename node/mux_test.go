package node_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/services"
)

// outcome is a Caller answering every call with the domain outcome of its code.
type outcome string

func (o outcome) Call(context.Context, string, string, actors.Request) ([]byte, error) {
	return nil, actors.Errorf(string(o), "refused")
}

// teapot is a service with one route, which answers whatever its caller says.
func teapot(name, pattern string, codes map[string]int) services.Service {
	return services.Service{
		Name: name,
		Routes: func(env services.Env, _ config.Config) []api.Route {
			caller, codes := env.Caller, env.Codes
			return []api.Route{{Pattern: pattern, Handler: func(w http.ResponseWriter, r *http.Request) {
				_, err := caller.Call(r.Context(), "k", "id", actors.Request{})
				codes.WriteError(w, err)
			}}}
		},
		Codes: codes,
	}
}

// NewMux serves every service's routes with its codes known, besides the operational routes.
func TestNewMux(t *testing.T) {
	ds := []services.Service{teapot("pot", "GET /pot", map[string]int{"dt_brewing": http.StatusTeapot}), {Name: "empty"}}
	mux, err := node.NewMux(nil, prometheus.NewRegistry(), ds, outcome("dt_brewing"), config.Default())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/pot", nil))
	if rec.Code != http.StatusTeapot || !strings.Contains(rec.Body.String(), "dt_brewing") {
		t.Fatalf("GET /pot: %d %s", rec.Code, rec.Body)
	}
	for _, p := range []string{"/healthz", "/openapi.yaml"} {
		if _, pattern := mux.Handler(httptest.NewRequest("GET", p, nil)); pattern != "GET "+p {
			t.Errorf("GET %s is served by %q", p, pattern)
		}
	}
}

// Two services claiming one code with different statuses, or one route, are errors naming the
// service, not panics.
func TestNewMuxConflicts(t *testing.T) {
	a := teapot("a", "GET /a", map[string]int{"dt_clash": http.StatusTeapot})
	b := teapot("b", "GET /b", map[string]int{"dt_clash": http.StatusConflict})
	if _, err := node.NewMux(nil, prometheus.NewRegistry(), []services.Service{a, b}, nil, config.Default()); err == nil ||
		!strings.Contains(err.Error(), "service b") || !strings.Contains(err.Error(), "dt_clash") {
		t.Fatalf("conflicting codes: %v", err)
	}
	c := teapot("c", "GET /a", nil)
	if _, err := node.NewMux(nil, prometheus.NewRegistry(), []services.Service{a, c}, nil, config.Default()); err == nil ||
		!strings.Contains(err.Error(), "service c") || !strings.Contains(err.Error(), "GET /a") {
		t.Fatalf("conflicting routes: %v", err)
	}
	ops := teapot("ops", "GET /healthz", nil)
	if _, err := node.NewMux(nil, prometheus.NewRegistry(), []services.Service{ops}, nil, config.Default()); err == nil {
		t.Fatal("a service route over an operational one was accepted")
	}
}
