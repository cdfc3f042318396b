package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Network faults with nftables.
//
// The nodes bind their own loopback addresses (nodeIPs), but a connection a node dials to
// another has the source address the kernel picks for 127/8 — 127.0.0.1, whichever node dials —
// so a rule on "ip saddr" alone cannot tell who sent a packet. Each node therefore runs with
// its own group id (proc.Config.GID), and the chain "tagging" marks every new connection
// (conntrack) with the node that opened it, from the socket's group (meta skgid). A packet
// from node A to node B is then either
//
//   - in the original direction of a connection A opened to B: ct mark A, ip daddr B; or
//   - in the reply direction of a connection B opened to A: ct mark B, ip saddr A
//
// and dropping A→B drops both. Every packet between two local processes passes the output
// hook of its sender exactly once, so one output chain covers both directions; dropping A→B
// only is the one-way partition. The test process's own connections (group 0) are never
// marked, so clients reach every node whatever the partition (as in Jepsen: the network
// between nodes is cut, not the clients' view). The table is created before any node
// starts, so that every connection is marked from its first packet, and deleted at exit.
const nftTable = "shardkeeper_chaos"

// nodeIPs are the loopback addresses of n1, n2, n3, and of n4…n9, which some tests join to
// the cluster of the first three (clusterSize).
var nodeIPs = []string{"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.15",
	"127.0.0.16", "127.0.0.17", "127.0.0.18", "127.0.0.19"}

// clusterSize is the number of nodes a scenario's cluster starts with.
const clusterSize = 3

// growIPs are the addresses of the two nodes the growth scenarios join (n4, n5).
var growIPs = nodeIPs[clusterSize : clusterSize+2]

// nodeGID is the group id node i (0-based) runs with when network faults are enabled.
func nodeGID(i int) uint32 { return 40011 + uint32(i) }

// nodeMark is the conntrack mark of connections opened by node i.
func nodeMark(i int) int { return 11 + i }

var (
	netMu sync.Mutex
	// netReason is empty when network faults can be injected, else why not.
	netReason string
)

func nft(args ...string) error {
	out, err := exec.Command("nft", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func setupNetwork() {
	switch {
	case os.Geteuid() != 0:
		netReason = "network partitions need root (nftables rules and per-node group ids)"
		return
	case func() bool { _, err := exec.LookPath("nft"); return err != nil }():
		netReason = "network partitions need the nft command (Debian package nftables)"
		return
	}
	_ = nft("delete", "table", "inet", nftTable) // left over by a run that crashed
	var rules strings.Builder
	fmt.Fprintf(&rules, "table inet %s {\n chain tagging {\n  type filter hook output priority -150; policy accept;\n", nftTable)
	for i := range nodeIPs {
		fmt.Fprintf(&rules, "  ct state new meta skgid %d ct mark set %d\n", nodeGID(i), nodeMark(i))
	}
	fmt.Fprintf(&rules, " }\n chain faults {\n  type filter hook output priority 0; policy accept;\n }\n}\n")
	f, err := os.CreateTemp("", "shardkeeper-chaos-*.nft")
	if err == nil {
		_, err = f.WriteString(rules.String())
		f.Close()
		defer os.Remove(f.Name())
	}
	if err == nil {
		err = nft("-f", f.Name())
	}
	if err != nil {
		netReason = fmt.Sprintf("network partitions disabled: cannot install nftables rules: %v", err)
	}
}

func teardownNetwork() {
	if netReason == "" {
		_ = nft("delete", "table", "inet", nftTable)
	}
}

// networkFaults reports whether partitions can be made; it skips t with the reason if not.
func requireNetwork(t *testing.T) {
	t.Helper()
	if netReason != "" {
		t.Skip(netReason)
	}
}

// dropLink drops every packet from node a to node b (0-based indexes).
func dropLink(t *testing.T, a, b int) {
	t.Helper()
	netMu.Lock()
	defer netMu.Unlock()
	for _, rule := range [][]string{
		{"ct", "direction", "original", "ct", "mark", fmt.Sprint(nodeMark(a)), "ip", "daddr", nodeIPs[b], "drop"},
		{"ct", "direction", "reply", "ct", "mark", fmt.Sprint(nodeMark(b)), "ip", "saddr", nodeIPs[a], "drop"},
	} {
		if err := nft(append([]string{"add", "rule", "inet", nftTable, "faults"}, rule...)...); err != nil {
			t.Fatal(err)
		}
	}
}

// healNetwork removes every partition rule.
func healNetwork(t *testing.T) {
	t.Helper()
	netMu.Lock()
	defer netMu.Unlock()
	if netReason != "" {
		return
	}
	if err := nft("flush", "chain", "inet", nftTable, "faults"); err != nil {
		t.Error(err)
	}
}
