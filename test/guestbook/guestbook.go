// Package guestbook is a sixth service, kept in the tests to show what adding one takes: this
// folder, and one line that lists it beside the others (the test's
// append(all.Services(), guestbook.Service()); in the binary, a line of services/all). It has
// everything a service declares — a setting, an actor kind, HTTP routes, an error code, a
// metric and a dashboard figure — and nothing outside this folder names it.
//
// A guestbook holds at most --guestbook-max-entries signatures, in the order they came:
//
//	POST /v1/guestbooks/{book}/entries   {"name": "…"}  → 200 {"entries": n}, or 409 guestbook_full
//	GET  /v1/guestbooks/{book}                          → 200 {"entries": ["…", …]}
package guestbook

import (
	"encoding/binary"
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/services"
)

// Config is the service's settings.
type Config struct {
	MaxEntries int
}

// Settings binds --guestbook-max-entries.
var Settings = config.NewSection("guestbook", func(c *Config) []config.Option {
	return []config.Option{
		config.Int(&c.MaxEntries, "guestbook-max-entries", "3", "signatures one guestbook holds (>= 1)").
			Checked(config.AtLeast(&c.MaxEntries, 1)),
	}
})

// KindName is the guestbook actor's kind.
const KindName = "guestbook"

// Service is the guestbook.
func Service() services.Service {
	return services.Service{
		Name:     "guestbook",
		Settings: Settings,
		Kinds: func(cfg config.Config, _ services.Env) []actors.Kind {
			max := Settings.Get(cfg).MaxEntries
			return []actors.Kind{{Name: KindName, New: func(string) actors.Handler { return &book{max: max} }}}
		},
		Routes:  routes,
		Codes:   map[string]int{"guestbook_full": http.StatusConflict},
		Figures: []services.Figure{{Label: "guestbook signatures", Metric: "shardkeeper_guestbook_signatures_total"}},
	}
}

// entry is a signature's body.
type entry struct {
	Name string `json:"name"`
}

// Entries is the reply of a read: every signature, in order.
type Entries struct {
	Entries []string `json:"entries"`
}

// book is one guestbook's actor: "n" holds the count, "e/<u64 i>" the i-th name.
type book struct{ max int }

var count = actors.Counter{Key: []byte("n")}

func entryKey(i int) []byte { return binary.BigEndian.AppendUint64([]byte("e/"), uint64(i)) }

func (b *book) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	n, err := count.Get(ctx)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case "sign":
		var e entry
		if err := json.Unmarshal(req.Body, &e); err != nil || !ident.Name(e.Name) {
			return nil, actors.Errorf("invalid_request", "name must match %s", ident.NamePattern)
		}
		if n >= b.max {
			return nil, actors.Errorf("guestbook_full", "this guestbook holds %d signatures already", n)
		}
		ctx.Put(entryKey(n), []byte(e.Name))
		count.Set(ctx, n+1)
		return json.Marshal(map[string]int{"entries": n + 1})
	case "read":
		kvs, err := ctx.List(actors.ListOptions{Prefix: []byte("e/")})
		if err != nil {
			return nil, err
		}
		out := Entries{Entries: []string{}}
		for _, kv := range kvs {
			out.Entries = append(out.Entries, string(kv.Value))
		}
		return json.Marshal(out)
	}
	return nil, actors.Errorf("invalid_request", "unknown method %s", ident.Quote(req.Method))
}

func routes(env services.Env, cfg config.Config) []api.Route {
	signed := services.Register(env.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shardkeeper_guestbook_signatures_total", Help: "Signatures the guestbooks took through this node."}))
	call := func(w http.ResponseWriter, r *http.Request, method string, body any) bool {
		book := r.PathValue("book")
		if !ident.Name(book) {
			api.WriteAPIError(w, api.InvalidID("book"))
			return false
		}
		out, err := api.CallRaw(r.Context(), env.Caller, cfg.RequestTimeout, KindName, book, method, body)
		if err != nil {
			env.Codes.WriteError(w, err)
			return false
		}
		api.WriteRawJSON(w, http.StatusOK, out)
		return true
	}
	return []api.Route{
		{Pattern: "POST /v1/guestbooks/{book}/entries", Handler: func(w http.ResponseWriter, r *http.Request) {
			var e entry
			if err := api.DecodeJSON(r, &e); err != nil {
				api.WriteAPIError(w, err)
				return
			}
			if call(w, r, "sign", e) {
				signed.Inc()
			}
		}},
		{Pattern: "GET /v1/guestbooks/{book}", Handler: func(w http.ResponseWriter, r *http.Request) {
			call(w, r, "read", struct{}{})
		}},
	}
}
