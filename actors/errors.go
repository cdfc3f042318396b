package actors

import (
	"errors"
	"fmt"
)

var (
	// ErrUnavailable means the request could not be answered from verified state: the
	// partition has no leader here, or its commit did not finish in the deadline. The API
	// answers 503 with Retry-After. The request's writes may or may not have applied.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnknownKind means no kind of that name is registered.
	ErrUnknownKind = errors.New("unknown actor kind")
)

func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}
