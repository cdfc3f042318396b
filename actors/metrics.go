package actors

import "github.com/prometheus/client_golang/prometheus"

// metrics are the runtime's Prometheus instruments (prefix shardkeeper_).
type metrics struct {
	active         *prometheus.GaugeVec
	activations    *prometheus.CounterVec
	passivations   *prometheus.CounterVec
	mailbox        *prometheus.GaugeVec
	commitLatency  prometheus.Histogram
	commitMessages prometheus.Histogram
	alarmsFired    *prometheus.CounterVec
	alarmsRetried  *prometheus.CounterVec
	alarmsParked   *prometheus.CounterVec
	alarmLateness  *prometheus.HistogramVec

	effectsStarted  *prometheus.CounterVec
	effectsFinished *prometheus.CounterVec
	effectsRunning  *prometheus.GaugeVec
	effectsWaiting  *prometheus.GaugeVec
	effectDuration  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	kind := []string{"kind"}
	m := &metrics{
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_actors_active", Help: "Live activations on this node."}, kind),
		activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_actor_activations_total", Help: "Activations created."}, kind),
		passivations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_actor_passivations_total", Help: "Activations stopped for being idle."}, kind),
		mailbox: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_actor_mailbox_messages", Help: "Messages queued to activations and not yet handled (mailbox depth)."}, kind),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shardkeeper_commit_duration_seconds", Help: "Time from proposing a command to its local apply.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		commitMessages: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shardkeeper_commit_messages", Help: "Messages whose writes one Raft command carries (write coalescing).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		alarmsFired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_alarms_fired_total", Help: "Alarm firings, retries included."}, kind),
		alarmsRetried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_alarms_retried_total", Help: "Alarm firings that failed and were rescheduled."}, kind),
		alarmsParked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_alarms_parked_total", Help: "Alarms given up after the last retry."}, kind),
		alarmLateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shardkeeper_alarm_lateness_seconds", Help: "Time from an alarm's scheduled time to its firing.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20)}, kind),
		effectsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_effects_started_total", Help: "Effect functions started."}, kind),
		effectsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardkeeper_effects_finished_total", Help: "Effects finished, by outcome: ok or error (result handed to the activation) or dropped (the activation had stopped)."},
			[]string{"kind", "outcome"}),
		effectsRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_effects_running", Help: "Effect functions running."}, kind),
		effectsWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardkeeper_effects_waiting", Help: "Committed effects waiting for a slot (MaxEffectsPerActor, MaxEffects and the kinds' reserves)."}, kind),
		effectDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shardkeeper_effect_duration_seconds", Help: "Time an effect function ran.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, kind),
	}
	for _, c := range []prometheus.Collector{m.active, m.activations, m.passivations, m.mailbox,
		m.commitLatency, m.commitMessages, m.alarmsFired, m.alarmsRetried, m.alarmsParked, m.alarmLateness,
		m.effectsStarted, m.effectsFinished, m.effectsRunning, m.effectsWaiting, m.effectDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// effectMetrics are the effect instruments of one kind, resolved once.
type effectMetrics struct {
	started, ok, failed, dropped prometheus.Counter
	running, waiting             prometheus.Gauge
	duration                     prometheus.Observer
}

func (m *metrics) effectsOf(kind string) *effectMetrics {
	return &effectMetrics{
		started:  m.effectsStarted.WithLabelValues(kind),
		ok:       m.effectsFinished.WithLabelValues(kind, "ok"),
		failed:   m.effectsFinished.WithLabelValues(kind, "error"),
		dropped:  m.effectsFinished.WithLabelValues(kind, "dropped"),
		running:  m.effectsRunning.WithLabelValues(kind),
		waiting:  m.effectsWaiting.WithLabelValues(kind),
		duration: m.effectDuration.WithLabelValues(kind),
	}
}
