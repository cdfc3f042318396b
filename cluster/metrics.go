package cluster

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports, at each scrape, the Raft state of every group replicated here, the
// members by state and the partitions without a leader or under-replicated, as this node
// sees them.
type Collector struct {
	host      *Host
	members   interface{ Members() []Member }
	directory *Directory
}

// NewCollector returns the cluster's Prometheus collector.
func NewCollector(h *Host, m interface{ Members() []Member }, d *Directory) *Collector {
	return &Collector{host: h, members: m, directory: d}
}

var (
	descLeader = prometheus.NewDesc("shardkeeper_raft_leader",
		"1 if this node leads the Raft group, 0 if it is another replica.", []string{"group"}, nil)
	descTerm = prometheus.NewDesc("shardkeeper_raft_term",
		"Current Raft term of the group on this node.", []string{"group"}, nil)
	descCommit = prometheus.NewDesc("shardkeeper_raft_commit_index",
		"Raft commit index of the group on this node.", []string{"group"}, nil)
	descApplied = prometheus.NewDesc("shardkeeper_raft_applied_index",
		"Index of the group's last entry applied to storage on this node.", []string{"group"}, nil)
	descContact = prometheus.NewDesc("shardkeeper_raft_last_contact_seconds",
		"On a follower, seconds since the group's leader last contacted it.", []string{"group"}, nil)
	descMembers = prometheus.NewDesc("shardkeeper_members",
		"Cluster members by state as this node's gossip sees them.", []string{"state"}, nil)
	descNoLeader = prometheus.NewDesc("shardkeeper_partitions_without_leader",
		"Partitions with no known leader.", nil, nil)
	descUnder = prometheus.NewDesc("shardkeeper_partitions_under_replicated",
		"Partitions with fewer live voters than min(R, members that did not leave).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTerm, descCommit, descApplied, descContact, descMembers, descNoLeader, descUnder} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, span := range c.host.Spans() {
		g := span.ID
		in := c.host.Info(g)
		if !in.Replica {
			continue
		}
		l := strconv.FormatUint(uint64(g), 10)
		leader := 0.0
		if in.Leader == c.host.ServerID() {
			leader = 1
		} else if !in.LastContact.IsZero() {
			ch <- prometheus.MustNewConstMetric(descContact, prometheus.GaugeValue, now.Sub(in.LastContact).Seconds(), l)
		}
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader, l)
		ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(in.Term), l)
		ch <- prometheus.MustNewConstMetric(descCommit, prometheus.GaugeValue, float64(in.Commit), l)
		ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(in.Applied), l)
	}
	states := map[string]int{StateAlive: 0, StateSuspect: 0, StateFailed: 0, StateLeft: 0}
	for _, m := range c.members.Members() {
		states[m.State]++
	}
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(n), s)
	}
	noLeader, under := 0, 0
	for _, st := range c.directory.Status() {
		if st.Leader == "" {
			noLeader++
		}
		if st.UnderReplicated {
			under++
		}
	}
	ch <- prometheus.MustNewConstMetric(descNoLeader, prometheus.GaugeValue, float64(noLeader))
	ch <- prometheus.MustNewConstMetric(descUnder, prometheus.GaugeValue, float64(under))
}
