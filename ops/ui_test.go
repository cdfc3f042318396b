package ops

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/services"
)

// The dashboard shows the runtime's figures always, a service's once its metric has a series
// (summed over them), and bytes in MiB.
func TestFigures(t *testing.T) {
	reg := prometheus.NewRegistry()
	queued := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "svc_queued", Help: "h"}, []string{"key"})
	reg.MustRegister(queued,
		prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "svc_idle", Help: "h"}, []string{"key"}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardkeeper_disk_free_bytes", Help: "h"}, func() float64 { return 3 << 20 }))
	queued.WithLabelValues("a").Set(2)
	queued.WithLabelValues("b").Set(5)
	got := map[string]string{}
	var order []string
	for _, f := range figures(reg, []services.Figure{{Label: "queued", Metric: "svc_queued"}, {Label: "idle", Metric: "svc_idle"}}) {
		got[f.Name] = f.Value
		order = append(order, f.Name)
	}
	for name, want := range map[string]string{"actors active": "0", "queued": "7", "disk free (MiB)": "3", "alarm lateness": "no alarm fired yet"} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q (figures %v)", name, got[name], want, got)
		}
	}
	if _, ok := got["idle"]; ok {
		t.Error("a service's figure whose metric has no series was shown")
	}
	if len(order) < 4 || order[3] != "queued" {
		t.Errorf("the services' figures do not follow the runtime's: %v", order)
	}
}
