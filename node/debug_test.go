package node

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The profiles are served, but not the command line, which may hold a token: it is answered
// 404 not_found on both listeners that serve profiles (--debug-addr, --admin-addr).
func TestProfilesLeaveOutCommandLine(t *testing.T) {
	mux := http.NewServeMux()
	registerProfiles(mux)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/cmdline?debug=1"} {
		rec := get(path)
		var body struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusNotFound || body.Error != "not_found" {
			t.Errorf("GET %s: %d %s, want 404 not_found", path, rec.Code, rec.Body)
		}
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/symbol"} {
		if rec := get(path); rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, rec.Code)
		}
	}
}
