package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

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

// retryAfterUnavailable is the Retry-After of a 503: long enough for an election.
const retryAfterUnavailable = 1

// WriteJSON writes v as the JSON body with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError maps err to the contract's error body: *Error as is, actors.ErrUnavailable to
// 503 unavailable with Retry-After, anything else to 500 internal.
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, actors.ErrUnavailable):
		e = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: err.Error(), RetryAfter: retryAfterUnavailable}
	default:
		e = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, e.Status, e)
}
