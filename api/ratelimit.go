package api

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// RateLimit bounds the requests of each client to rate per second, in bursts of up to burst.
// A client is its IP address (an IPv6 client its /64): a token it sends is not checked here,
// so keying by token would give every made-up token a budget of its own. Past its budget a request is answered 429 rate_limited with Retry-After, the
// whole seconds until the client may send again. Requests for which exempt is true always
// pass (health checks, metrics). Clients idle for a minute are forgotten, so the table stays
// as large as the clients of the last minute. rate <= 0: no limit.
//
// Behind a load balancer every client has the balancer's address: limit by token there, or
// at the balancer.
func RateLimit(rate float64, burst int, exempt func(*http.Request) bool, h http.Handler) http.Handler {
	if rate <= 0 {
		return h
	}
	return newLimiter(rate, burst, time.Now).handler(exempt, h)
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(max(burst, 1)), clients: map[string]*bucket{}, now: now}
}

func (l *limiter) handler(exempt func(*http.Request) bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt != nil && exempt(r) {
			h.ServeHTTP(w, r)
			return
		}
		if wait := l.take(clientOf(r)); wait > 0 {
			WriteAPIError(w, &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
				Message: "too many requests from this client", RetryAfter: int(math.Ceil(wait.Seconds()))})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// clientOf names the client of r: its IP address, an IPv6 address's /64.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String()
	}
	return host
}

// limiter is a token bucket per client.
type limiter struct {
	rate, burst float64
	now         func() time.Time

	mu      sync.Mutex
	clients map[string]*bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

// forgetAfter is how long an idle client's bucket is kept (a full bucket needs no memory).
const forgetAfter = time.Minute

// take spends one token of client's bucket and returns 0, or how long until one is back.
func (l *limiter) take(client string) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > forgetAfter {
		for c, b := range l.clients {
			if now.Sub(b.at) > forgetAfter {
				delete(l.clients, c)
			}
		}
		l.swept = now
	}
	b, ok := l.clients[client]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.clients[client] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}
