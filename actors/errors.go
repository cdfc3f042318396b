package actors

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrUnavailable means the request could not be answered from verified state: the
	// partition has no leader here, or its commit did not finish in the deadline. The API
	// answers 503 with Retry-After. The request's writes may or may not have applied.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnknownKind means no kind of that name is registered.
	ErrUnknownKind = errors.New("unknown actor kind")
)

// Unavailable builds an error wrapping ErrUnavailable.
func Unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// Error is a domain outcome a handler returns instead of a reply, such as "nonce_used". It
// carries a stable code (part of the API contract; the api package maps codes to HTTP
// statuses) and a message for humans. Unlike any other handler error it does NOT roll back
// the message's writes: an outcome like "the first verify attempt consumes the nonce whatever
// its result" writes and fails at once. Handlers that must not write simply don't.
type Error struct {
	Code    string
	Message string
	// RetryAfter, when positive, tells the client when trying again may succeed.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
