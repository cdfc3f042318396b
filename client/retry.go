package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// RetryPolicy says how a call is retried. Only three things are retried:
//
//   - a 429 or 503 answer, on every call: the server says when to come back (Retry-After) and
//     the client waits at least that long (not 429 budget_exceeded, a relayer account's
//     deposit budget, whose wait may be hours: the caller decides);
//   - a connection that could not be made (a dial error), on every call: the request never
//     reached a server, so sending it again (to the next base URL) cannot apply it twice;
//   - any other transport error (reset connection, timeout while waiting for the answer), only
//     on idempotent calls: reads, register device, server heartbeat, deletes, nonce consume and
//     device verify (both made idempotent by a request_id), and relayer submits (idempotent by
//     their idempotency_key). Issue nonce and challenge are not
//     idempotent — the first attempt may have been applied — so such an error is returned to
//     the caller, who alone knows whether a second nonce or challenge is acceptable (a lost one
//     is harmless: it expires unused).
//
// Every other status is returned at once. A wait that would end after the context's deadline
// is not started: the last error is returned instead.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts per call, the first included; 1 (or less)
	// disables retries.
	MaxAttempts int
	// BaseDelay is the backoff ceiling before the first retry; it doubles per retry up to
	// MaxDelay. The wait is drawn uniformly in [0, ceiling) ("full jitter"). Zero means 50 ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff ceiling (not a server's Retry-After). Zero means 2 s.
	MaxDelay time.Duration
}

// DefaultRetryPolicy is the policy of a client built without WithRetryPolicy.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, BaseDelay: 50 * time.Millisecond, MaxDelay: 2 * time.Second}

// NoRetry is a policy of exactly one attempt per call.
var NoRetry = RetryPolicy{MaxAttempts: 1}

// normalized fills the zero fields with their documented defaults.
func (p RetryPolicy) normalized() RetryPolicy {
	if p.MaxAttempts < 1 {
		p.MaxAttempts = 1
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 50 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 2 * time.Second
	}
	return p
}

// backoff is the wait before retry number n (1 for the first retry) when the server gave no
// Retry-After: uniform in [0, min(MaxDelay, BaseDelay·2^(n-1))). u is uniform in [0, 1).
func (p RetryPolicy) backoff(n int, u float64) time.Duration {
	ceiling := p.MaxDelay
	if n-1 < 31 && p.BaseDelay<<(n-1) < ceiling && p.BaseDelay<<(n-1) > 0 {
		ceiling = p.BaseDelay << (n - 1)
	}
	return time.Duration(u * float64(ceiling))
}

// wait is the pause before retry number n after err. A Retry-After is honoured in full
// and a jitter of up to BaseDelay is added, so that clients told the same second do not
// return in lockstep; u1 and u2 are uniform in [0, 1).
func (p RetryPolicy) wait(n int, err error, u1, u2 float64) time.Duration {
	d := p.backoff(n, u1)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		d = max(d, apiErr.RetryAfter) + time.Duration(u2*float64(p.BaseDelay))
	}
	return d
}

// retryable reports whether err, returned by one attempt of a call, may be retried.
func retryable(err error, idempotent bool) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		if apiErr.Code == "budget_exceeded" {
			return false // a relayer account's policy: its Retry-After may be hours, the caller decides
		}
		return apiErr.Status == http.StatusTooManyRequests || apiErr.Status == http.StatusServiceUnavailable
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true // the request was never sent
	}
	var transport *transportError
	return idempotent && errors.As(err, &transport)
}

// transportError marks an error of the HTTP exchange itself (no answer was read), as
// opposed to an answer the client could not use.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// parseRetryAfter reads a Retry-After header: whole seconds (the contract's form) or an
// HTTP date. Absent or malformed is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// sleepContext waits d or until ctx is done, whichever comes first.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
