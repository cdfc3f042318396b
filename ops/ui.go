package ops

import (
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/services"
)

// The operator's dashboard, GET /ui: one page, rendered here from this node's view (the same
// as /v1/cluster and /metrics), refreshed by the browser every few seconds. No script: what
// the page shows is what the server rendered.

type dashboardData struct {
	NodeID  string
	Ready   string // "" when ready, else why not
	Now     time.Time
	Members []dashboardMember
	Groups  []dashboardGroup
	Figures []figure
}

type dashboardMember struct {
	Member
	For string
}

// dashboardGroup is one Raft group: its partitions [First, Last] share its status.
type dashboardGroup struct {
	cluster.PartitionStatus
	First, Last uint32
	Lag         string
}

// Name is the group as logs name it (cluster.GroupName).
func (g dashboardGroup) Name() string { return cluster.GroupName(g.Group) }

type figure struct{ Name, Value string }

var dashboardPage = template.Must(template.New("ui").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>shardkeeper · {{.NodeID}}</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{padding:.25em .8em;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4}.bad{color:#b00020;font-weight:600}.ok{color:#1b5e20}
</style></head><body>
<h1>shardkeeper — view of node <span id="node">{{.NodeID}}</span></h1>
<p id="ready">{{if .Ready}}<span class="bad">not ready: {{.Ready}}</span>{{else}}<span class="ok">ready</span>{{end}} · {{.Now.Format "2006-01-02 15:04:05 MST"}}</p>
<h2>Members</h2>
<table id="members"><tr><th>node</th><th>state</th><th>for</th><th>HTTP</th><th>disk</th></tr>
{{range .Members}}<tr data-node="{{.NodeID}}"><td>{{.NodeID}}</td><td class="{{if eq .State "alive"}}ok{{else}}bad{{end}}">{{.State}}{{if .Leaving}} (leaving){{end}}</td><td>{{.For}}</td><td>{{.HTTPAddr}}</td><td>{{if .DiskLow}}<span class="bad">low</span>{{else}}ok{{end}}</td></tr>
{{end}}</table>
<h2>Raft groups</h2>
<table id="groups"><tr><th>group</th><th>partitions</th><th>leader</th><th>voters</th><th>non-voters</th><th>applied index</th><th>lag</th><th></th></tr>
{{range .Groups}}<tr data-group="{{.Group}}"><td>{{.Name}}</td><td>{{.First}}–{{.Last}}</td><td>{{if .Leader}}{{.Leader}}{{else}}<span class="bad">none</span>{{end}}</td><td>{{range $i, $v := .Voters}}{{if $i}}, {{end}}{{$v}}{{end}}</td><td>{{range $i, $v := .NonVoters}}{{if $i}}, {{end}}{{$v}}{{end}}</td><td>{{.AppliedIndex}}</td><td>{{.Lag}}</td><td>{{if .UnderReplicated}}<span class="bad">under-replicated</span>{{end}}</td></tr>
{{end}}</table>
<h2>This node</h2>
<table id="figures">{{range .Figures}}<tr><th>{{.Name}}</th><td>{{.Value}}</td></tr>
{{end}}</table>
</body></html>
`))

// dashboard answers GET /ui.
func dashboard(view ClusterView, gatherer prometheus.Gatherer, extra []services.Figure) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d := dashboardData{NodeID: view.NodeID(), Now: time.Now()}
		if err := view.Ready(); err != nil {
			d.Ready = err.Error()
		}
		for _, m := range view.Members() {
			d.Members = append(d.Members, dashboardMember{Member: m,
				For: time.Since(time.UnixMilli(m.StateSince)).Round(time.Second).String()})
		}
		// Partitions in order, a group's contiguous: one row per group.
		for _, p := range view.Partitions() {
			if n := len(d.Groups); n > 0 && d.Groups[n-1].Group == p.Group {
				d.Groups[n-1].Last = p.ID
				continue
			}
			var lag []string
			for id, n := range p.Lag {
				lag = append(lag, id+" "+itoa(n))
			}
			sort.Strings(lag)
			d.Groups = append(d.Groups, dashboardGroup{PartitionStatus: p, First: p.ID, Last: p.ID, Lag: strings.Join(lag, ", ")})
		}
		d.Figures = figures(gatherer, extra)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		// No script, no framing by other pages.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		if err := dashboardPage.Execute(w, d); err != nil {
			slog.Warn("dashboard", "error", err)
		}
	}
}

// figures picks what an operator looks at first from this node's metrics: the runtime's, the
// services' (extra), the disk's and the alarms' lateness.
func figures(g prometheus.Gatherer, extra []services.Figure) []figure {
	mfs, err := g.Gather()
	if err != nil {
		return []figure{{"metrics", "unavailable"}}
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	sum := func(name string) (float64, bool) {
		mf, ok := byName[name]
		if !ok {
			return 0, false
		}
		var s float64
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				s += m.Gauge.GetValue()
			case m.Counter != nil:
				s += m.Counter.GetValue()
			}
		}
		return s, true
	}
	type line struct {
		label, name string
		always      bool // shown as 0 before the metric has a series
	}
	lines := []line{
		{"actors active", "shardkeeper_actors_active", true},
		{"messages in mailboxes", "shardkeeper_actor_mailbox_messages", true},
		{"effects running", "shardkeeper_effects_running", true},
	}
	for _, f := range extra {
		lines = append(lines, line{f.Label, f.Metric, false})
	}
	lines = append(lines, line{"disk free (MiB)", "shardkeeper_disk_free_bytes", false})
	var out []figure
	for _, f := range lines {
		v, ok := sum(f.name)
		if !ok && !f.always {
			continue
		}
		if strings.HasSuffix(f.name, "_bytes") {
			v = float64(uint64(v) >> 20)
		}
		out = append(out, figure{f.label, ftoa(v)})
	}
	var n uint64
	var s float64
	for _, m := range byName["shardkeeper_alarm_lateness_seconds"].GetMetric() {
		n += m.GetHistogram().GetSampleCount()
		s += m.GetHistogram().GetSampleSum()
	}
	late := "no alarm fired yet"
	if n > 0 {
		late = (time.Duration(s / float64(n) * float64(time.Second))).Round(time.Millisecond).String() + " mean over " + itoa(n) + " alarms"
	}
	return append(out, figure{"alarm lateness", late})
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
