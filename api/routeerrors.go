package api

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/ident"
)

// RouteErrors answers the mux's own refusals in the contract's JSON error format: an unknown
// path is 404 not_found, a known path with another method 405 method_not_allowed, keeping the
// mux's Allow header. Everything else passes through untouched, the 404s of handlers included.
//
// mux is the *http.ServeMux, or a handler that passes the request itself on to it: an answer is
// the mux's own exactly when the mux matched no pattern, which it records in the request.
func RouteErrors(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(&routeErrorWriter{ResponseWriter: w, r: r}, r)
	})
}

// routeErrorWriter replaces the mux's plain-text 404 and 405 with the JSON error.
type routeErrorWriter struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool // the JSON error is written: the mux's own body is dropped
}

func (w *routeErrorWriter) WriteHeader(code int) {
	if w.r.Pattern != "" || (code != http.StatusNotFound && code != http.StatusMethodNotAllowed) {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	path := ident.Quote(w.r.URL.Path)
	e := Errorf(http.StatusNotFound, "not_found", "no route for %s", path)
	if code == http.StatusMethodNotAllowed {
		e = Errorf(code, "method_not_allowed", "%s is not allowed on %s; allowed: %s",
			ident.Quote(w.r.Method), path, w.Header().Get("Allow"))
	}
	w.Header().Del("X-Content-Type-Options")
	WriteAPIError(w.ResponseWriter, e)
}

func (w *routeErrorWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *routeErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
