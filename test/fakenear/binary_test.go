package fakenear

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}

// TestBinary starts cmd/fakenear as a process with an accounts file and two endpoints, and
// drives it as a test in another process would: near.Client for RPC, /fake/ for the rest.
func TestBinary(t *testing.T) {
	bin := proc.Build(t, "./test/fakenear/cmd/fakenear")
	dir := t.TempDir()
	accounts, _ := json.Marshal(map[string]any{"accounts": []Account{
		{ID: relayerID, Balance: hundredNEAR, Keys: []AccountKey{{PublicKey: relayerKey.PublicKey()}}},
		{ID: bobID, Balance: hundredNEAR},
	}})
	must(t, os.WriteFile(filepath.Join(dir, "accounts.json"), accounts, 0o644))
	addrFile := filepath.Join(dir, "addr.json")
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0,127.0.0.1:0", "--forward-delay", "0,2", "--block-interval", "0",
		"--accounts", filepath.Join(dir, "accounts.json"), "--addr-file", addrFile, "--admin-listen", "127.0.0.1:0",
		"--genesis-height", "500", "--log-level", "debug")
	logFile, err := os.Create(filepath.Join(dir, "fakenear.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "fakenear.log"))
			t.Logf("fakenear log:\n%s", log)
		}
	})

	var addrs struct {
		Endpoints []EndpointInfo `json:"endpoints"`
		Admin     string         `json:"admin"`
	}
	await.True(t, 30*time.Second, "the address file", func() bool {
		data, err := os.ReadFile(addrFile)
		return err == nil && json.Unmarshal(data, &addrs) == nil
	})
	if len(addrs.Endpoints) != 2 || addrs.Endpoints[1].ForwardDelayBlocks != 2 || addrs.Admin == "" {
		t.Fatalf("addresses %+v", addrs)
	}
	c, err := near.NewClient([]string{addrs.Endpoints[0].URL})
	must(t, err)
	ctx := context.Background()

	b, err := c.Block(ctx, near.FinalityFinal)
	if err != nil || b.Height != 500 {
		t.Fatalf("block: %+v, %v; want the genesis at 500", b, err)
	}
	ak, err := c.ViewAccessKey(ctx, relayerID, relayerKey.PublicKey(), near.FinalityFinal)
	if err != nil || ak.Nonce != 500*nonceMultiplier {
		t.Fatalf("access key from the accounts file: %+v, %v", ak, err)
	}

	tx := near.Transaction{SignerID: relayerID, PublicKey: relayerKey.PublicKey(), Nonce: ak.Nonce + 1, ReceiverID: bobID,
		BlockHash: b.Hash, Actions: []near.Action{near.Transfer{Deposit: near.U128From64(1)}}}
	signed, h, err := near.SignTransaction(tx, relayerKey)
	must(t, err)
	raw, _ := signed.Encode()
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	if s, body := adminCall(t, "POST", addrs.Admin+"blocks", map[string]int{"count": 3}); s != http.StatusOK {
		t.Fatalf("blocks: %d %s", s, body)
	}
	out, err := c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID, WaitUntil: near.TxFinal})
	if err != nil || out.Kind() != near.OutcomeSucceeded {
		t.Fatalf("status: %+v, %v", out, err)
	}
	if got := getLedger(t, addrs.Endpoints[0].URL, "kind=landed"); len(got) != 1 || got[0].Hash != h.String() || got[0].Height != 501 {
		t.Fatalf("ledger %+v", got)
	}
	if s, body := adminCall(t, "PUT", addrs.Admin+"faults", map[string]any{"endpoint": "rpc0",
		"rules": []FaultRule{{Kind: FaultStatus, Status: 503, Next: 1}}}); s != http.StatusOK {
		t.Fatalf("faults: %d %s", s, body)
	}
	var te *near.TransportError
	if _, err := c.Block(ctx, near.FinalityFinal); !errors.As(err, &te) || te.StatusCode != 503 {
		t.Fatalf("after setting a 503 fault: %v", err)
	}

	must(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("exit on SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10s of SIGTERM")
	}
}
