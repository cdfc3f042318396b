package api

import (
	"bytes"
	"net/http"
	"sync/atomic"
)

// Shed bounds the requests h serves at once. Past max, a request is answered 503
// unavailable with Retry-After at once rather than queued behind the others: a node that
// took them all would answer every one of them late. A request counts once its body is read
// (up to MaxBody and one byte, which the handler's decoding refuses as too large): a client
// that sends its body slowly holds a connection, bounded by ConnGuard and the read timeout,
// never a place here. Requests for which exempt is true always pass: health checks must
// answer when the node is busiest. max < 1: no bound.
func Shed(max int, exempt func(*http.Request) bool, h http.Handler) http.Handler {
	if max < 1 {
		return h
	}
	var inFlight atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt != nil && exempt(r) {
			h.ServeHTTP(w, r)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := ReadBody(r)
			if err != nil {
				WriteAPIError(w, Errorf(http.StatusBadRequest, "invalid_request", "the request body could not be read"))
				return
			}
			r.Body = &readBody{Reader: bytes.NewReader(body), b: body}
		}
		if inFlight.Add(1) > int64(max) {
			inFlight.Add(-1)
			WriteAPIError(w, &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
				Message: "too many requests in flight on this node; retry in a second", RetryAfter: 1})
			return
		}
		defer inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}
