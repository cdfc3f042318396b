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
	"sync"
	"sync/atomic"
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

// coreCodes are the error codes of the HTTP layer and of the conventions every domain shares,
// with their statuses. Domains add theirs with RegisterCodes.
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

// codes maps every known error code, as actor kinds return them in *actors.Error, to its HTTP
// status: coreCodes merged with every domain's. It is replaced, never changed in place, so that
// WriteError reads it without a lock.
var (
	codes   atomic.Pointer[map[string]int]
	codesMu sync.Mutex // serializes RegisterCodes
)

func init() {
	m := maps.Clone(coreCodes)
	codes.Store(&m)
}

// RegisterCodes adds a domain's error codes and their HTTP statuses to the map WriteError uses.
// A code known already with the same status is fine (two domains may share "nonce_used"); with
// another status it is an error naming both, and nothing is added.
func RegisterCodes(add map[string]int) error {
	codesMu.Lock()
	defer codesMu.Unlock()
	m := maps.Clone(*codes.Load())
	for code, status := range add {
		if old, ok := m[code]; ok && old != status {
			return fmt.Errorf("error code %q maps to HTTP %d, and already to %d", code, status, old)
		}
		m[code] = status
	}
	codes.Store(&m)
	return nil
}

// Codes returns every known error code with its HTTP status.
func Codes() map[string]int { return maps.Clone(*codes.Load()) }

// CoreCodes returns the codes of the HTTP layer and the shared conventions (those known before
// any RegisterCodes) with their HTTP statuses.
func CoreCodes() map[string]int { return maps.Clone(coreCodes) }

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

// WriteError maps err to the contract's error body: *Error as is; *actors.Error by its code;
// actors.ErrUnavailable to 503 unavailable; anything else to 500 internal. 429 and 503 always
// carry Retry-After.
func WriteError(w http.ResponseWriter, err error) {
	WriteAPIError(w, AsError(err))
}

// AsError converts any error to the contract's error (see WriteError).
func AsError(err error) *Error {
	var e *Error
	var outcome *actors.Error
	switch {
	case errors.As(err, &e):
		e = &Error{Status: e.Status, Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter}
	case errors.As(err, &outcome):
		status, ok := (*codes.Load())[outcome.Code]
		if !ok { // a programming error: the domain did not register the code
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
