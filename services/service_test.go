package services_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/services"
)

// refusing answers every call with the outcome of its code.
type refusing string

func (r refusing) Call(context.Context, string, string, actors.Request) ([]byte, error) {
	return nil, actors.Errorf(string(r), "refused")
}

// The lists of a node's services: settings, kinds, routes (which write the services' codes
// when given none), figures, and one table of codes.
func TestLists(t *testing.T) {
	sec := config.NewSection("s", func(p *int) []config.Option { return []config.Option{config.Int(p, "dt-n", "4", "")} })
	ss := []services.Service{
		{Name: "a", Settings: sec, Kinds: func(c config.Config, _ services.Env) []actors.Kind {
			return []actors.Kind{{Name: "k" + strings.Repeat("x", sec.Get(c))}}
		}, Figures: []services.Figure{{Label: "a things", Metric: "a_things"}}},
		{Name: "b", Codes: map[string]int{"dt_brewing": http.StatusTeapot}, Routes: func(env services.Env, _ config.Config) []api.Route {
			return []api.Route{{Pattern: "GET /b", Handler: func(w http.ResponseWriter, r *http.Request) {
				_, err := env.Caller.Call(r.Context(), "k", "id", actors.Request{})
				env.Codes.WriteError(w, err)
			}}}
		}},
	}
	if g := services.Settings(ss); len(g) != 1 || g[0] != config.Group(sec) {
		t.Fatalf("Settings = %v", g)
	}
	if k := services.Kinds(ss, config.Default(), services.Env{}); len(k) != 1 || k[0].Name != "kxxxx" {
		t.Fatalf("Kinds = %v", k)
	}
	r := services.Routes(ss, services.Env{Caller: refusing("dt_brewing")}, config.Default())
	if len(r) != 1 || r[0].Pattern != "GET /b" {
		t.Fatalf("Routes = %v", r)
	}
	rec := httptest.NewRecorder()
	r[0].Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/b", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("a route listed without codes answered its service's code %d, want 418", rec.Code)
	}
	if f := services.Figures(ss); len(f) != 1 || f[0].Metric != "a_things" {
		t.Fatalf("Figures = %v", f)
	}
	if c, err := services.Codes(ss); err != nil || c.Map()["dt_brewing"] != http.StatusTeapot || c.Map()["not_found"] != http.StatusNotFound {
		t.Fatalf("Codes = %v, %v", c, err)
	}
	clash := append(ss, services.Service{Name: "c", Codes: map[string]int{"dt_brewing": http.StatusConflict}})
	if _, err := services.Codes(clash); err == nil || !strings.Contains(err.Error(), "service c") {
		t.Fatalf("a code with two statuses: %v, want an error naming service c", err)
	}
}
