package actortest

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric sums a gathered metric of reg over its series whose labels include labels: counter or
// gauge values, or for histograms the sample count (field "count") or sum (field "sum").
func Metric(t testing.TB, reg prometheus.Gatherer, name, field string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				total += value(m, field)
			}
		}
	}
	return total
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func value(m *dto.Metric, field string) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil && field == "sum":
		return m.Histogram.GetSampleSum()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	panic(fmt.Sprintf("unsupported metric %v", m))
}
