package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// Error is the JSON error body of the contract: {"error": code, "message": text}.
type Error struct {
	Status     int    `json:"-"`
	Code       string `json:"error"`
	Message    string `json:"message"`
	RetryAfter int    `json:"-"` // seconds; sent as Retry-After when > 0
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// retryAfterUnavailable is the Retry-After of a 503 unavailable: about one election.
const retryAfterUnavailable = 1

// coreCodes are the error codes of the HTTP layer and of the conventions every service shares,
// with their statuses. A node's Codes adds every service's.
var coreCodes = map[string]int{
	"invalid_request":    http.StatusBadRequest,
	"invalid_id":         http.StatusBadRequest,
	"unauthorized":       http.StatusUnauthorized,
	"admin_disabled":     http.StatusForbidden,
	"not_found":          http.StatusNotFound,
	"method_not_allowed": http.StatusMethodNotAllowed,
	"body_too_large":     http.StatusRequestEntityTooLarge,
	"internal":           http.StatusInternalServerError,
	"unavailable":        http.StatusServiceUnavailable,
	"rate_limited":       http.StatusTooManyRequests,
	"gossip_key_refused": http.StatusConflict,
}

// Codes maps the error codes actor kinds return in *actors.Error to HTTP statuses: the core
// codes and those of the services a mux serves. It is built once and never changed, so that
// handlers read it without a lock; a nil *Codes holds the core codes only.
type Codes struct{ status map[string]int }

// CoreCodes returns the codes of the HTTP layer and the shared conventions.
func CoreCodes() *Codes { return &Codes{status: coreCodes} }

// With returns c with add's codes too. A code known already with the same status is fine (two
// services may share "nonce_used"); with another status it is an error naming both.
func (c *Codes) With(add map[string]int) (*Codes, error) {
	m := c.Map()
	for code, status := range add {
		if old, ok := m[code]; ok && old != status {
			return nil, fmt.Errorf("error code %q maps to HTTP %d, and already to %d", code, status, old)
		}
		m[code] = status
	}
	return &Codes{status: m}, nil
}

// Map returns every code of c with its HTTP status.
func (c *Codes) Map() map[string]int { return maps.Clone(c.table()) }

func (c *Codes) table() map[string]int {
	if c == nil {
		return coreCodes
	}
	return c.status
}

// WriteJSON writes v as the JSON body with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteRawJSON writes body, one JSON value produced by encoding/json, as WriteJSON would
// have written it: followed by a newline.
func WriteRawJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body) + 1)}
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// WriteError writes err as the contract's error body, knowing the core codes only: for the
// HTTP layer's own routes. A service's routes write with the node's Codes (Codes.WriteError).
func WriteError(w http.ResponseWriter, err error) { (*Codes)(nil).WriteError(w, err) }

// WriteError maps err to the contract's error body: *Error as is; *actors.Error by its code;
// actors.ErrUnavailable to 503 unavailable; anything else to 500 internal. 429 and 503 always
// carry Retry-After.
func (c *Codes) WriteError(w http.ResponseWriter, err error) {
	WriteAPIError(w, c.AsError(err))
}

// AsError converts any error to the contract's error (see WriteError).
func (c *Codes) AsError(err error) *Error {
	var e *Error
	var outcome *actors.Error
	switch {
	case errors.As(err, &e):
		e = &Error{Status: e.Status, Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter}
	case errors.As(err, &outcome):
		status, ok := c.table()[outcome.Code]
		if !ok { // a programming error: the service did not declare the code
			status = http.StatusInternalServerError
		}
		e = &Error{Status: status, Code: outcome.Code, Message: outcome.Message, RetryAfter: seconds(outcome.RetryAfter)}
	case errors.Is(err, actors.ErrUnavailable):
		e = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: err.Error()}
	default:
		// Its text may say how the node works inside: logged, not answered.
		slog.Error("internal error", "error", err)
		e = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the node's log has the details"}
	}
	if (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) && e.RetryAfter <= 0 {
		e.RetryAfter = retryAfterUnavailable
	}
	return e
}

// WriteAPIError writes e.
func WriteAPIError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, e.Status, e)
}

// seconds rounds a positive duration up to whole seconds (at least 1).
func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(d.Seconds())))
}
