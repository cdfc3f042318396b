package client

import (
	"errors"
	"fmt"
	"time"
)

// APIError is an error answer of the server: the contract's body
// {"error": "<code>", "message": "<text>"} with the HTTP status and, on 429 and 503, the
// Retry-After header. An answer whose body is not such an object (a proxy's 502 page, say)
// has an empty Code and the start of the body as Message.
type APIError struct {
	Status     int           // HTTP status code
	Code       string        // the contract's error code, e.g. "nonce_used"; "" if the body had none
	Message    string        // text for humans
	RetryAfter time.Duration // the Retry-After header (whole seconds); 0 when absent
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("shardkeeper: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("shardkeeper: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrorCode is the contract error code of err when it is (or wraps) an *APIError, else "".
func ErrorCode(err error) string {
	var e *APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
