package crash

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// The gossip key of a live TLS cluster is rotated with the operator's commands — install the
// new key, use it, remove the old one — and no member is lost at any step. A node restarted
// afterwards with its old --gossip-key flag rejoins: it keeps the keyring it was rotated to.
func TestGossipKeyRotation(t *testing.T) {
	dir := t.TempDir()
	secret := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	oldFile := secret("old.key", base64.StdEncoding.EncodeToString(oldKey))
	newFile := secret("new.key", base64.StdEncoding.EncodeToString(newKey))
	tokenFile := secret("admin.token", strings.Repeat("t", 40))
	bin := proc.Build(t, "./cmd/shardkeeper")
	nodes := proc.StartCluster(t, proc.ClusterConfig{Bin: bin, Command: []string{"serve"}, N: 3, TLSDir: filepath.Join(dir, "tls"),
		Flags: append(append([]string{}, fastFlags...), "--gossip-key-file", oldFile, "--admin-token-file", tokenFile)})
	for _, n := range nodes {
		n.WaitReady(60 * time.Second)
	}
	waitSettled(t, nodes[0])

	command := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append(append([]string{"gossip-key"}, args...), "--addr", nodes[0].HTTPAddr, "--token-file", tokenFile)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := command(args...)
		if err != nil {
			t.Fatalf("gossip-key %v: %v\n%s", args, err, out)
		}
		return out
	}
	allAlive := func(step string) {
		t.Helper()
		for _, n := range nodes {
			v := clusterView(t, n)
			alive := 0
			for _, m := range v.Members {
				if m.State == "alive" {
					alive++
				}
			}
			if alive != 3 {
				t.Fatalf("after %s, %s sees %d alive members: %+v", step, n.Config.NodeID, alive, v.Members)
			}
		}
	}
	// keys returns the key fingerprints each member shows, as "list" prints them.
	keys := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(run("list")), "\n")[1:] {
			f := strings.Fields(line)
			got[f[0]] = strings.Join(f[2:], " ")
		}
		return got
	}
	expect := func(step, want string) {
		t.Helper()
		got := keys()
		for _, n := range nodes {
			if got[n.Config.NodeID] != want {
				t.Fatalf("after %s: keys %v, want %q on every member", step, got, want)
			}
		}
		allAlive(step)
	}
	oldFP, newFP := cluster.Fingerprint(oldKey), cluster.Fingerprint(newKey)
	expect("start", oldFP)

	run("install", "--key-file", newFile)
	expect("install", oldFP+" "+newFP)
	if out, err := command("remove", "--key-file", oldFile); err == nil || !strings.Contains(out, "uses the key") {
		t.Fatalf("removing the key in use: %v\n%s", err, out)
	}
	run("use", "--key-file", newFile)
	expect("use", newFP+" "+oldFP)
	run("remove", "--key-file", oldFile)
	expect("remove", newFP)

	// Restarted with its old flag, a node uses the keyring it was rotated to.
	nodes[2].Kill()
	nodes[2].RestartReady()
	await.True(t, 30*time.Second, "the restarted node alive everywhere", func() bool {
		for _, n := range nodes {
			for _, m := range clusterView(t, n).Members {
				if m.State != "alive" {
					return false
				}
			}
		}
		return true
	})
	expect("restart", newFP)
	if !strings.Contains(nodes[2].Output(), "the configured gossip key is not in the keyring") {
		t.Error("the restarted node did not say that it ignores its flag's key")
	}
}
