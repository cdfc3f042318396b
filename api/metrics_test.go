package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/api"
)

func TestInstrument(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := api.Instrument(reg, testMux())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/items/1"}, {"GET", "/items/2"}, {"PUT", "/items/3"}, {"GET", "/missing"},
		{"GET", "/nope"}, {"DELETE", "/items/1"}, {"BREW", "/items/1"},
	} {
		serve(h, r.method, r.path)
	}
	requests := func(route, method, code string) float64 {
		return actortest.Metric(t, reg, "shardkeeper_http_requests_total", "",
			map[string]string{"route": route, "method": method, "code": code})
	}
	for _, c := range []struct {
		route, method, code string
		want                float64
	}{
		{"/items/{id}", "GET", "200", 2},
		{"/items/{id}", "PUT", "200", 1},
		{"/missing", "GET", "404", 1},
		{"unmatched", "GET", "404", 1},
		{"unmatched", "DELETE", "405", 1},
		{"unmatched", "other", "405", 1}, // a made-up method is no label of its own
	} {
		if got := requests(c.route, c.method, c.code); got != c.want {
			t.Errorf("requests{route=%q,method=%q,code=%q} = %v, want %v", c.route, c.method, c.code, got, c.want)
		}
	}
	if got := actortest.Metric(t, reg, "shardkeeper_http_requests_total", "", nil); got != 7 {
		t.Errorf("%v requests counted, want 7", got)
	}
	if n := actortest.Metric(t, reg, "shardkeeper_http_request_duration_seconds", "count",
		map[string]string{"route": "/items/{id}", "method": "GET"}); n != 2 {
		t.Errorf("duration observations of GET /items/{id}: %v, want 2", n)
	}

	// A second handler on the same registry (a second listener) counts into the same series.
	second, err := api.Instrument(reg, testMux())
	if err != nil {
		t.Fatal(err)
	}
	second.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/items/7", nil))
	if got := actortest.Metric(t, reg, "shardkeeper_http_requests_total", "", nil); got != 8 {
		t.Errorf("%v requests counted after one through a second handler, want 8", got)
	}
}

// The duration observed is the handler's.
func TestInstrumentTimes(t *testing.T) {
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) { time.Sleep(20 * time.Millisecond) })
	h, err := api.Instrument(reg, mux)
	if err != nil {
		t.Fatal(err)
	}
	serve(h, "GET", "/slow")
	if s := actortest.Metric(t, reg, "shardkeeper_http_request_duration_seconds", "sum", nil); s < 0.02 {
		t.Fatalf("observed %vs, want at least 20ms", s)
	}
	if n := actortest.Metric(t, reg, "shardkeeper_http_requests_total", "", map[string]string{"route": "/slow", "code": "200"}); n != 1 {
		t.Fatalf("a handler that writes nothing answers 200: counted %v", n)
	}
}
