package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/api"
)

// testMux serves GET and PUT /items/{id}, and a handler of its own that answers 404.
func testMux() http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
	}
	mux.HandleFunc("GET /items/{id}", ok)
	mux.HandleFunc("PUT /items/{id}", ok)
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, _ *http.Request) {
		api.WriteAPIError(w, api.Errorf(http.StatusNotFound, "unknown_item", "no such item"))
	})
	return api.RouteErrors(mux)
}

func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func errorBody(t *testing.T, rec *httptest.ResponseRecorder) api.Error {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return e
}

func TestRouteErrorsNotFound(t *testing.T) {
	h := testMux()
	for _, path := range []string{"/nope", "/items", "/items/1/more", "/" + strings.Repeat("p", 50000)} {
		rec := serve(h, http.MethodGet, path)
		e := errorBody(t, rec)
		if rec.Code != http.StatusNotFound || e.Code != "not_found" || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("GET %.40s: %d %q %q", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		if len(e.Message) > 200 {
			t.Fatalf("GET %.40s: the message repeats the path (%d bytes)", path, len(e.Message))
		}
	}
}

func TestRouteErrorsMethodNotAllowed(t *testing.T) {
	rec := serve(testMux(), http.MethodDelete, "/items/7")
	e := errorBody(t, rec)
	if rec.Code != http.StatusMethodNotAllowed || e.Code != "method_not_allowed" || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("DELETE /items/7: %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	allow := rec.Header().Get("Allow")
	for _, m := range []string{"GET", "PUT"} {
		if !strings.Contains(allow, m) || !strings.Contains(e.Message, m) {
			t.Fatalf("Allow %q, message %q: want both to name %s", allow, e.Message, m)
		}
	}
}

// Answers of routes, their own 404s included, pass through untouched.
func TestRouteErrorsLeavesRoutesAlone(t *testing.T) {
	h := testMux()
	if rec := serve(h, http.MethodPut, "/items/1"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ok":"yes"`) {
		t.Fatalf("PUT /items/1: %d %q", rec.Code, rec.Body)
	}
	rec := serve(h, http.MethodGet, "/missing")
	if e := errorBody(t, rec); rec.Code != http.StatusNotFound || e.Code != "unknown_item" {
		t.Fatalf("GET /missing: %d %q", rec.Code, rec.Body)
	}
}
