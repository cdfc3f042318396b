package crash

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mr-tron/base58"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// A node given its secrets in files — the admin and relayer tokens, the relayer's keys, the
// gossip key, its TLS key — and a gossip key installed at run time
// never shows them: not in its command line or environment (ps, /proc, /debug/pprof/cmdline),
// not in its logs, not in any answer, right or wrong token. A token shorter than 32 bytes is
// logged as weak, without its value.
func TestSecretsStayHidden(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	adminToken := "adm1n-t0ken" // weak on purpose
	relayerToken := "relayer-token-that-is-long-enough-0123456789"
	seed := sha256.Sum256([]byte("secrets test key"))
	secretKey := "ed25519:" + base58.Encode(ed25519.NewKeyFromSeed(seed[:]))
	gossipKey := "Z29zc2lwLWtleS1vZi10aGUtc2VjcmV0cy10ZXN0ISE="
	secrets := []string{adminToken, relayerToken, secretKey, strings.TrimPrefix(secretKey, "ed25519:"), gossipKey}

	debug := proc.FreeAddr(t)
	n := proc.StartReady(t, proc.Config{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, TLSDir: filepath.Join(dir, "tls"),
		Flags: []string{"--partitions", "4", "--debug-addr", debug,
			"--admin-token-file", write("admin-token", adminToken+"\n"),
			"--relayer-token-file", write("relayer-token", relayerToken),
			"--relayer-keys", write("keys.json", fmt.Sprintf(`{"accounts":[{"account_id":"relayer.test","keys":[%q]}]}`, secretKey)),
			"--near-rpc", "http://127.0.0.1:1/",
			"--gossip-key-file", write("gossip-key", gossipKey)}})

	tlsKey, err := os.ReadFile(filepath.Join(dir, "tls", "n1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, strings.Split(string(tlsKey), "\n")[1]) // a line of the key's base64
	newGossipKey := "bmV3LWdvc3NpcC1rZXktb2YtdGhlLXNlY3JldHMtdCE="
	secrets = append(secrets, newGossipKey)

	seen := map[string]string{}
	read := func(what, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		seen[what] = string(b)
	}
	read("command line", fmt.Sprintf("/proc/%d/cmdline", n.PID()))
	read("environment", fmt.Sprintf("/proc/%d/environ", n.PID()))
	get := func(what, url string, header ...string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if strings.Contains(url, "/intents") {
			req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(`{"idempotency_key":"k1","receiver_id":"bob.test","actions":[{"Transfer":{"deposit":"1"}}]}`))
		}
		if strings.Contains(url, "/devices/") {
			req.Method = http.MethodDelete
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen[what] = fmt.Sprintf("%d %v %s", resp.StatusCode, resp.Header, b)
	}
	get("pprof command line", "http://"+debug+"/debug/pprof/cmdline")
	for _, tok := range []string{"", "wrong", adminToken, relayerToken, adminToken + "x", relayerToken[:10]} {
		auth := []string{"Authorization", "Bearer " + tok}
		get("admin delete with "+tok, n.URL("/v1/attest/r1/devices/d1"), auth...)
		get("relayer status with "+tok, n.URL("/v1/relayers/relayer.test"), auth...)
		get("relayer submit with "+tok, n.URL("/v1/relayers/relayer.test/intents"), auth...)
	}
	for _, op := range []string{"install", "remove", "use"} {
		req, _ := http.NewRequest(http.MethodPost, n.URL("/v1/cluster/gossip-keys"), strings.NewReader(`{"op":"`+op+`","key":"`+newGossipKey+`"}`))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen["gossip key "+op] = fmt.Sprintf("%d %v %s", resp.StatusCode, resp.Header, b)
	}
	if !strings.HasPrefix(seen["gossip key install"], "200") {
		t.Fatalf("gossip key install: %s", seen["gossip key install"])
	}
	if !strings.HasPrefix(seen["relayer submit with "+relayerToken], "201") {
		t.Fatalf("the relayer did not take an intent with its token: %s", seen["relayer submit with "+relayerToken])
	}
	// The key's actor has now tried the unreachable RPC node: its errors are in the log.
	n.Term()
	read("log", n.LogPath)
	if !strings.Contains(seen["log"], "the admin token is weak") {
		t.Error("the weak admin token was not logged as weak")
	}
	for what, text := range seen {
		for i, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("the %s shows secret %d", what, i)
			}
		}
	}
}
