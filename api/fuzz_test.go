package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	pathpkg "path"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/services/all"
)

// refusingCaller answers every actor call with an outcome "not found", so that any response
// other than a 4xx with an error code comes from request decoding itself.
type refusingCaller struct{}

func (refusingCaller) Call(context.Context, string, string, actors.Request) ([]byte, error) {
	return nil, actors.Errorf("not_found", "fuzz: no actor answers")
}

var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/v1/attest/%s/register"},
	{"POST", "/v1/attest/%s/challenge"},
	{"POST", "/v1/attest/%s/verify"},
	{"GET", "/v1/attest/reg/devices/%s"},
	{"DELETE", "/v1/attest/reg/devices/%s"},
	{"POST", "/attest/register"},
	{"POST", "/attest/challenge"},
	{"POST", "/attest/verify"},
	{"PUT", "/v1/servers/reg/%s"},
	{"GET", "/v1/servers/%s"},
	{"DELETE", "/v1/servers/reg/%s"},
	{"POST", "/servers"},
	{"POST", "/v1/nonces"},
	{"POST", "/v1/nonces/%s/consume"},
	{"GET", "/v1/nonces/%s"},
}

// FuzzRequestDecoding: whatever the body and path argument, a handler never panics and
// answers a 4xx whose JSON body carries an error code (the refusing caller makes every
// request that decodes cleanly end in 404; a path that does not route is the JSON 404 too).
func FuzzRequestDecoding(f *testing.F) {
	seeds := []string{
		`{"device_id":"d1","version":"1","platform":"p","build_hash":"h","public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`,
		`{"device_id":"d1"}`, `{"device_id":"d1","nonce":"n","signature":"AAAA"}`,
		`{"address":"10.0.0.1:80","region":"eu","meta":{"a":1}}`, `{"serverId":"s1","address":"x"}`,
		`{"org_id":"acme"}`, `{"org_id":"acme","request_id":"r1"}`,
		``, `{`, `null`, `[]`, `{"unknown":1}`, `{"org_id":"acme"} {}`, `{"org_id":1}`,
		`{"meta":"` + string(bytes.Repeat([]byte("x"), 5000)) + `","address":"a"}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), "reg", []byte(s))
		f.Add(uint8(i+7), "0a_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", []byte(s))
	}
	f.Add(uint8(0), "bad id!", []byte(`{}`))
	f.Add(uint8(12), "x", bytes.Repeat([]byte(" "), api.MaxBody+1))
	cfg := config.Default()
	cfg.AdminToken = "secret"
	mux, err := node.NewMux(nil, prometheus.NewRegistry(), all.Services(), refusingCaller{}, cfg)
	if err != nil {
		f.Fatal(err)
	}
	handler := api.RouteErrors(mux)
	f.Fuzz(func(t *testing.T, route uint8, arg string, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := r.path
		if bytes.Contains([]byte(path), []byte("%s")) {
			path = string(bytes.Replace([]byte(path), []byte("%s"), []byte(url.PathEscape(arg)), 1))
		}
		if pathpkg.Clean(path) != path {
			return // the mux redirects unclean paths ("//", "/./") before any handler runs
		}
		req := httptest.NewRequest(r.method, "http://sk"+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%s %s body %q: status %d, want 4xx: %s", r.method, path, body, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: status %d with Content-Type %q", r.method, path, rec.Code, ct)
		}
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s: status %d without an error code: %q", r.method, path, rec.Code, rec.Body)
		}
	})
}
