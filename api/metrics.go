package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Instrument counts and times every request h serves, on reg:
//
//	shardkeeper_http_requests_total{route,method,code}
//	shardkeeper_http_request_duration_seconds{route,method}
//
// route is the pattern of the mux route that served the request without its method
// ("/v1/nonces/{nonce}/consume"), or "unmatched" when none did (404s); method is the request's
// method ("other" for a method HTTP does not define, so that clients cannot make up labels);
// code is the status answered. h must pass the request itself on to the mux, which records the
// pattern in it.
func Instrument(reg prometheus.Registerer, h http.Handler) (http.Handler, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardkeeper_http_requests_total",
		Help: "HTTP requests answered, by route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "shardkeeper_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route pattern and method.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route", "method"})
	// A second listener of the node (--admin-addr) shares the instruments of the first.
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(requests); errors.As(err, &are) {
		requests = are.ExistingCollector.(*prometheus.CounterVec)
	} else if err != nil {
		return nil, fmt.Errorf("register HTTP metrics: %w", err)
	}
	if err := reg.Register(duration); errors.As(err, &are) {
		duration = are.ExistingCollector.(*prometheus.HistogramVec)
	} else if err != nil {
		return nil, fmt.Errorf("register HTTP metrics: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		route, method := routeLabel(r.Pattern), methodLabel(r.Method)
		requests.WithLabelValues(route, method, strconv.Itoa(sw.status())).Inc()
		duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	}), nil
}

// routeLabel is a mux pattern without its method: "/v1/nonces/{nonce}".
func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return strings.TrimSpace(path)
	}
	return pattern
}

// methodLabel is method if HTTP defines it, else "other".
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

// statusWriter records the status of the answer.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// status is the status answered: 200 when the handler wrote nothing at all.
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
