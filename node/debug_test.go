package node

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The profiles are served, but not the command line, which may hold a token: it is answered
// 404 not_found on both listeners that serve profiles (--debug-addr, --admin-addr), and the
// index page lists every other profile without it.
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
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/symbol",
		"/debug/pprof/allocs?debug=1", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=0.1"} {
		if rec := get(path); rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, rec.Code)
		}
	}

	// The index lists every profile it serves, and not the command line.
	rec := get("/debug/pprof/")
	index := rec.Body.String()
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("index Content-Type %q", ct)
	}
	if strings.Contains(index, "cmdline") {
		t.Errorf("the index lists cmdline:\n%s", index)
	}
	for _, name := range []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate", "profile", "symbol", "trace"} {
		if !strings.Contains(index, name+`?debug=1'>`+name+`</a>`) && !strings.Contains(index, name+`?debug=1">`+name+`</a>`) {
			t.Errorf("the index does not link %s:\n%s", name, index)
		}
	}
	if !strings.Contains(index, `<a href="goroutine?debug=2">`) {
		t.Errorf("the index has no full goroutine dump link:\n%s", index)
	}
}
