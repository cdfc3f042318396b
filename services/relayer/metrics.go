package relayer

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/services"
)

// Metrics are the relayer's Prometheus instruments. Counters count what a handler did; a
// message whose writes are then discarded (a failed commit, a retried alarm) may be counted
// twice, which a rate never notices. The per-key gauges are set by the key's activation and
// removed when it ends, so only the node leading a key reports it. A nil *Metrics records
// nothing.
type Metrics struct {
	queued, inFlight *prometheus.GaugeVec   // {key}
	intents          *prometheus.CounterVec // {event}
	invalidNonce     *prometheus.CounterVec // {key}
	resends          *prometheus.CounterVec // {key}
	unknown          *prometheus.CounterVec // {key}
	landing          prometheus.Histogram
	rpc              *prometheus.HistogramVec // {method, endpoint, outcome}
	refusals         *prometheus.CounterVec   // {account, rule}
	deaths           *prometheus.CounterVec   // {verdict}
}

// Intent events counted by shardkeeper_relayer_intents_total.
const (
	eventAccepted  = "accepted"  // a new intent queued
	eventSigned    = "signed"    // a transaction signed for it (again, after a replacement)
	eventReplaced  = "replaced"  // its transaction proven dead: back to the queue
	eventSucceeded = "succeeded" // terminal statuses
	eventFailed    = "failed"
	eventRejected  = "rejected"
)

// NewMetrics creates the relayer's instruments on reg; instruments already registered there
// (a second relayer of one registry, in tests) are shared.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	key := []string{"key"}
	m := &Metrics{
		queued: services.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_relayer_key_queued", Help: "Intents accepted and not yet signed, per access key (account/public key), on the node leading the key."}, key)),
		inFlight: services.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_relayer_key_in_flight", Help: "Signed, non-terminal transactions per access key, on the node leading the key."}, key)),
		intents: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_relayer_intents_total", Help: "Intent events: accepted, signed, replaced (proven dead, signed again), succeeded, failed, rejected."}, []string{"event"})),
		invalidNonce: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_relayer_invalid_nonce_total", Help: "InvalidNonce answers about the key's transactions (a foreign sender, or a transaction that already landed)."}, key)),
		resends: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_relayer_resends_total", Help: "Signed transactions sent again with their identical bytes (an unknown outcome, a new activation)."}, key)),
		unknown: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_relayer_unknown_outcomes_total", Help: "Sends and status queries whose outcome stayed unknown (no answer, 408/5xx, TIMEOUT_ERROR)."}, key)),
		landing: services.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shardkeeper_relayer_landing_seconds", Help: "Time from an intent's acceptance to its transaction seen in a block.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)})),
		rpc: services.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shardkeeper_near_rpc_duration_seconds", Help: "NEAR JSON-RPC requests by method, endpoint and outcome (ok, error: the node's, unknown: no answer).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"method", "endpoint", "outcome"})),
		refusals: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_relayer_policy_refusals_total", Help: "Intents refused by their account's policy, by account and rule (deposit_budget also counts budget_exceeded)."}, []string{"account", "rule"})),
		deaths: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_relayer_death_checks_total", Help: "Transactions one NEAR endpoint declared dead, asked of every endpoint: confirmed (two agree, none knows it: signed again), refuted (an endpoint knows it) or inconclusive (asked again later)."}, []string{"verdict"})),
	}
	return m
}

// ObserveRPC records one JSON-RPC request (near.WithObserver).
func (m *Metrics) ObserveRPC(o near.Observation) {
	if m == nil {
		return
	}
	m.rpc.WithLabelValues(o.Method, o.Endpoint, o.Outcome).Observe(o.Took.Seconds())
}

// confirmed counts a death check of every endpoint by its verdict: confirmed (signed again),
// refuted (an endpoint knows the transaction) or inconclusive (asked again later).
func (m *keyMetrics) confirmed(verdict string) {
	if m == nil || m.m == nil {
		return
	}
	m.m.deaths.WithLabelValues(verdict).Inc()
}

// refused counts an intent of account refused by rule.
func (m *Metrics) refused(account, rule string) {
	if m != nil {
		m.refusals.WithLabelValues(account, rule).Inc()
	}
}

func (m *Metrics) event(e string) {
	if m != nil {
		m.intents.WithLabelValues(e).Inc()
	}
}

// keyMetrics are the instruments of one key actor. The counters are resolved once; the
// gauges at each set, since the activation before this one may delete them when it ends
// after this one started.
type keyMetrics struct {
	m                                     *Metrics
	key                                   string
	invalidNonce, resends, unknownOutcome prometheus.Counter
}

func (m *Metrics) forKey(key string) *keyMetrics {
	if m == nil {
		return nil
	}
	return &keyMetrics{m: m, key: key,
		invalidNonce: m.invalidNonce.WithLabelValues(key), resends: m.resends.WithLabelValues(key),
		unknownOutcome: m.unknown.WithLabelValues(key)}
}

// depth sets the key's gauges.
func (k *keyMetrics) depth(queued, inFlight int) {
	if k != nil {
		k.m.queued.WithLabelValues(k.key).Set(float64(queued))
		k.m.inFlight.WithLabelValues(k.key).Set(float64(inFlight))
	}
}

// rpcError counts what an RPC error says about the key's transaction.
func (k *keyMetrics) rpcError(err error) {
	if k == nil || err == nil {
		return
	}
	if near.IsOutcomeUnknown(err) {
		k.unknownOutcome.Inc()
	}
	if errors.As(err, new(*near.InvalidNonceError)) {
		k.invalidNonce.Inc()
	}
}

func (k *keyMetrics) resent() {
	if k != nil {
		k.resends.Inc()
	}
}

// landed records the time from an intent's acceptance (created, Unix ms) to now.
func (k *keyMetrics) landed(created int64, now time.Time) {
	if k != nil {
		k.m.landing.Observe(now.Sub(time.UnixMilli(created)).Seconds())
	}
}

func (k *keyMetrics) event(e string) {
	if k != nil {
		k.m.event(e)
	}
}

// drop removes the key's gauges: its activation ended (another node may lead it now).
func (k *keyMetrics) drop() {
	if k != nil {
		k.m.queued.DeleteLabelValues(k.key)
		k.m.inFlight.DeleteLabelValues(k.key)
	}
}
