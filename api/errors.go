package api

import (
	"encoding/json"
	"errors"
	"fmt"
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

// codeStatus maps the contract's error codes, as actor kinds return them in *actors.Error,
// to HTTP statuses. A code missing here is a programming error and answers 500.
var codeStatus = map[string]int{
	"invalid_request":   http.StatusBadRequest,
	"invalid_id":        http.StatusBadRequest,
	"invalid_signature": http.StatusUnauthorized,
	"org_mismatch":      http.StatusForbidden,
	"not_found":         http.StatusNotFound,
	"unknown_device":    http.StatusNotFound,
	"unknown_nonce":     http.StatusNotFound,
	"unknown_server":    http.StatusNotFound,
	"nonce_used":        http.StatusConflict,
	"nonce_expired":     http.StatusGone,
	"body_too_large":    http.StatusRequestEntityTooLarge,
	"too_many_pending":  http.StatusTooManyRequests,
	"registry_full":     http.StatusServiceUnavailable,
	"unavailable":       http.StatusServiceUnavailable,
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
		status, ok := codeStatus[outcome.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		e = &Error{Status: status, Code: outcome.Code, Message: outcome.Message, RetryAfter: seconds(outcome.RetryAfter)}
	case errors.Is(err, actors.ErrUnavailable):
		e = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: err.Error()}
	default:
		e = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
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
