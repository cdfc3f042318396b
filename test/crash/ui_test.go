package crash

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// The operator's dashboard of a running three-node cluster, as headless Chromium renders it:
// every member alive, every partition with its leader and voters.
func TestDashboardInChromium(t *testing.T) {
	var browser string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no Chromium installed (Debian package chromium)")
	}
	nodes := proc.StartCluster(t, proc.ClusterConfig{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, N: 3,
		TLSDir: t.TempDir(), Flags: fastFlags})
	for _, n := range nodes {
		n.WaitReady(60 * time.Second)
	}
	waitSettled(t, nodes[0])
	// The cluster starts with fewer groups than nodes, and splits one to have one per node.
	await.True(t, 60*time.Second, "one Raft group per node, each led, with three replicas", func() bool {
		s := clusterView(t, nodes[0])
		seen := map[uint32]bool{}
		for _, p := range s.Partitions {
			if p.Leader == "" || len(p.Replicas) != 3 {
				return false
			}
			seen[p.Group] = true
		}
		return len(seen) == len(nodes)
	})

	render := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir="+t.TempDir(), "--dump-dom", nodes[1].URL("/ui"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		return string(out)
	}
	// The page shows the node as it is when rendered: a leadership moving to it right then
	// (balancing) shows it catching up, not ready, for a moment.
	var dom string
	await.True(t, 30*time.Second, "the page shows node n2 ready", func() bool {
		dom = render()
		return strings.Contains(dom, `<span id="node">n2</span>`) && strings.Contains(dom, `class="ok">ready</span>`)
	})
	for _, id := range []string{"n1", "n2", "n3"} {
		row := regexp.MustCompile(`<tr data-node="` + id + `"><td>` + id + `</td><td class="ok">alive</td>`)
		if !row.MatchString(dom) {
			t.Errorf("member %s is not shown alive:\n%s", id, dom)
		}
	}
	rows := regexp.MustCompile(`<tr data-group="(\d+)"><td>(?:\d+|0x[0-9a-f]+)</td><td>(\d+)–(\d+)</td><td>(n[123])</td><td>(n\d, n\d, n\d)</td>`).FindAllStringSubmatch(dom, -1)
	if len(rows) != len(nodes) {
		t.Fatalf("%d Raft groups shown with a leader and three voters, want %d:\n%s", len(rows), len(nodes), dom)
	}
	next := 0
	for _, r := range rows {
		if !strings.Contains(r[5], r[4]) {
			t.Errorf("group %s: leader %s is not among its voters %s", r[1], r[4], r[5])
		}
		if first, _ := strconv.Atoi(r[2]); first != next {
			t.Errorf("group %s starts at partition %s, want %d", r[1], r[2], next)
		}
		last, _ := strconv.Atoi(r[3])
		next = last + 1
	}
	if next != partitions {
		t.Errorf("the groups shown cover partitions 0–%d, want 0–%d", next-1, partitions-1)
	}
	if !strings.Contains(dom, "<th>actors active</th>") {
		t.Errorf("the node's figures are missing:\n%s", dom)
	}
}
