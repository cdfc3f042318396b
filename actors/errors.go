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
	// ErrNotApplied accompanies ErrUnavailable when the request certainly had no effect: it
	// was refused before it ran, its writes were never proposed, or it wrote nothing. Such a
	// request may be sent again, to the partition's new leader (the router does so).
	ErrNotApplied = errors.New("not applied")
	// ErrUnknownKind means no kind of that name is registered.
	ErrUnknownKind = errors.New("unknown actor kind")
)

// Unavailable builds an error wrapping ErrUnavailable.
func Unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// NotApplied builds an error wrapping ErrUnavailable and ErrNotApplied.
func NotApplied(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", ErrUnavailable, ErrNotApplied, fmt.Sprintf(format, args...))
}

// notApplied marks err, an ErrUnavailable, as certainly without effect.
func notApplied(err error) error {
	if errors.Is(err, ErrNotApplied) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ErrNotApplied)
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
