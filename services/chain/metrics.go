package chain

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/services"
)

// Metrics are the chain's Prometheus instruments. Counters count what a handler did; a
// message whose writes are then discarded (a failed commit) may be counted twice, which a
// rate never notices. The per-chain gauges are set by the chain's activation and removed when
// it ends, so only the node leading a chain reports it. A nil *Metrics records nothing.
type Metrics struct {
	queued, inFlight, unconfirmed *prometheus.GaugeVec   // {chain}
	events                        *prometheus.CounterVec // {event}
	posts                         *prometheus.CounterVec // {result}
	reposts                       prometheus.Counter
	quotesRefused                 prometheus.Counter
	toPosted, toConfirmed         prometheus.Histogram
}

// Event events counted by shardkeeper_chain_events_total.
const (
	eventAccepted  = "accepted"  // a new version queued
	eventSigned    = "signed"    // signed as the next event of its chain
	eventResigned  = "resigned"  // signed again, its transaction expired unmined
	eventConfirmed = "confirmed" // mined deep enough
	eventFailed    = "failed"    // retries exhausted before signing
	eventBroken    = "broken"    // mined, linking to a transaction that expired unmined
	eventBundled   = "bundled"   // bundle mode: put in a bundle (its wrapper signed)
	eventRewrapped = "rewrapped" // bundle mode: a bundle's wrapper signed again (counted per bundle)
	eventReorged   = "reorged"   // bundle mode: a confirmed bundle's wrapper dropped by a reorg, posted again (counted per bundle)
	eventForked    = "forked"    // bundle mode: a replaced wrapper seen mined: the chain on Arweave forks there
)

// NewMetrics creates the chain's instruments on reg (shared with instruments already there).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	chain := []string{"chain"}
	return &Metrics{
		queued: services.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_chain_queued", Help: "Events accepted and not yet signed, per chain, on the node leading the chain."}, chain)),
		inFlight: services.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_chain_posts_in_flight", Help: "POST /tx requests under way, per chain (at most --chain-max-in-flight, plus re-posts)."}, chain)),
		unconfirmed: services.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_chain_unconfirmed", Help: "Events signed and not yet confirmed, per chain (at most --chain-max-unconfirmed)."}, chain)),
		events: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_chain_events_total", Help: "Chain events: accepted, signed, resigned (expired unmined, signed again), confirmed, failed, broken (mined while the event before expired unmined: the chain on Arweave breaks there; alert on it); in bundle mode bundled, rewrapped (per bundle) reorged (a confirmed bundle a reorg dropped, per bundle) and forked (a replaced wrapper seen mined: alert on it)."}, []string{"event"})),
		posts: services.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_chain_posts_total", Help: "POST /tx by result: accepted (200 or 208), rejected (the node refused it), unknown (no answer, 429, 5xx)."}, []string{"result"})),
		reposts: services.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardkeeper_chain_reposts_total", Help: "Signed transactions posted again with their same bytes (unknown to the node when polled)."})),
		quotesRefused: services.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardkeeper_chain_quotes_refused_total", Help: "Prepares refused because the quoted reward was above --chain-max-reward (fee_too_high): nothing signed; each counts as a failed prepare."})),
		toPosted: services.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shardkeeper_chain_posted_seconds", Help: "Time from an event's acceptance to the node taking its transaction.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)})),
		toConfirmed: services.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shardkeeper_chain_confirmed_seconds", Help: "Time from an event's acceptance to its confirmation.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16)})),
	}
}

func (m *Metrics) event(e string, n int) {
	if m != nil && n > 0 {
		m.events.WithLabelValues(e).Add(float64(n))
	}
}

// posted counts a post's outcome, and the time from acceptance (Unix ms) to it when the node
// took the transaction for the first time.
func (m *Metrics) posted(err error, accepted int64, first bool, now time.Time) {
	if m == nil {
		return
	}
	switch {
	case err == nil:
		m.posts.WithLabelValues("accepted").Inc()
		if first && accepted > 0 {
			m.toPosted.Observe(now.Sub(time.UnixMilli(accepted)).Seconds())
		}
	case errors.Is(err, arweave.ErrRejected):
		m.posts.WithLabelValues("rejected").Inc()
	default:
		m.posts.WithLabelValues("unknown").Inc()
	}
}

func (m *Metrics) reposted() {
	if m != nil {
		m.reposts.Inc()
	}
}

func (m *Metrics) quoteRefused() {
	if m != nil {
		m.quotesRefused.Inc()
	}
}

func (m *Metrics) confirmed(accepted int64, now time.Time) {
	if m != nil {
		m.events.WithLabelValues(eventConfirmed).Inc()
		if accepted > 0 {
			m.toConfirmed.Observe(now.Sub(time.UnixMilli(accepted)).Seconds())
		}
	}
}

// depth sets chain's gauges.
func (m *Metrics) depth(chain string, queued, inFlight int, unconfirmed int64) {
	if m != nil {
		m.queued.WithLabelValues(chain).Set(float64(queued))
		m.inFlight.WithLabelValues(chain).Set(float64(inFlight))
		m.unconfirmed.WithLabelValues(chain).Set(float64(unconfirmed))
	}
}

// drop removes chain's gauges.
func (m *Metrics) drop(chain string) {
	if m != nil {
		m.queued.DeleteLabelValues(chain)
		m.inFlight.DeleteLabelValues(chain)
		m.unconfirmed.DeleteLabelValues(chain)
	}
}
