package client_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/nodetest"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
	"github.com/shardkeeper/shardkeeper/tlog"
	"golang.org/x/mod/sumdb/note"
)

// Every chain call of the client against a real node anchoring on the fake Arweave node: the
// answers decode into their types, the tokens go where they belong, and the proofs verify.
func TestChainCalls(t *testing.T) {
	f := fakearweave.New(fakearweave.Config{BlockInterval: 20 * time.Millisecond})
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	dir := t.TempDir()
	skey, vkey, err := note.GenerateKey(nil, "log.test")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"wallet.json": arweave.TestWalletJWK(t), "log.key": []byte(skey)}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const token = "chain-token-for-the-client-test-0123456789"
	n := nodetest.Start(t, func(cfg *config.Config) {
		cfg.AdminToken = "s3cret"
		chain.Settings.Update(cfg, func(o *chain.Options) {
			o.Gateway, o.WalletFile, o.LogKeyFile, o.Token = srv.URL, filepath.Join(dir, "wallet.json"), filepath.Join(dir, "log.key"), token
			o.PollInterval = 20 * time.Millisecond
			if err := o.Load(); err != nil {
				t.Fatal(err)
			}
		})
	})
	url := "http://" + n.HTTPAddr()
	c, err := client.New([]string{url}, client.WithChainToken(token), client.WithAdminToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	ev := client.ChainEvent{EntityID: "org:acme.dev-1", Ver: 1, Op: "create", Vis: "public", Manifest: json.RawMessage(`{"b":2,"a":1}`)}
	first, created, err := c.AppendEvent(ctx, "main", ev)
	if err != nil || !created || first.Status != client.EventQueued || !strings.HasPrefix(first.CID, "b") {
		t.Fatalf("append: %+v %v %v", first, created, err)
	}
	again, created, err := c.AppendEvent(ctx, "main", ev)
	if err != nil || created || again.CID != first.CID {
		t.Fatalf("repeat: %+v %v %v", again, created, err)
	}
	ev.Op = "update"
	_, _, err = c.AppendEvent(ctx, "main", ev)
	wantCode(t, err, http.StatusConflict, "event_conflict")
	noToken, _ := client.New([]string{url})
	_, _, err = noToken.AppendEvent(ctx, "main", ev)
	wantCode(t, err, http.StatusUnauthorized, "unauthorized")
	for ver := int64(2); ver <= 3; ver++ {
		ev.Ver = ver
		if _, _, err := c.AppendEvent(ctx, "main", ev); err != nil {
			t.Fatal(err)
		}
	}

	var head *client.ChainHead
	await.True(t, 30*time.Second, "three events confirmed", func() bool {
		head, err = c.ChainHead(ctx, "main")
		return err == nil && head.ConfirmedSeq == 3
	})
	if head.Seq != 3 || head.TxID == nil || head.Queued != 0 {
		t.Fatalf("head %+v", head)
	}
	e3, err := c.GetEvent(ctx, "main", 3)
	if err != nil || e3.Status != client.EventConfirmed || e3.TxID != *head.TxID || e3.PrevTx == nil || e3.Ver != 3 {
		t.Fatalf("event 3: %+v %v", e3, err)
	}
	_, err = c.GetEvent(ctx, "main", 4)
	wantCode(t, err, http.StatusNotFound, "unknown_event")
	latest, err := c.GetEntity(ctx, "main", "org:acme.dev-1")
	if err != nil || latest.Ver != 3 || latest.TxID != e3.TxID || latest.Seq != 3 {
		t.Fatalf("entity: %+v %v", latest, err)
	}
	v1, err := c.GetVersion(ctx, "main", "org:acme.dev-1", 1)
	if err != nil || v1.Status != client.EventConfirmed || v1.CID != first.CID || v1.Seq != 1 || v1.Error != nil {
		t.Fatalf("version 1: %+v %v", v1, err)
	}
	_, err = c.GetEntity(ctx, "main", "nobody")
	wantCode(t, err, http.StatusNotFound, "unknown_entity")

	// The checkpoint is signed by the log key, and the proofs verify against its root.
	cp, err := c.Checkpoint(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := note.Open(cp, note.VerifierList(v))
	if err != nil {
		t.Fatalf("checkpoint %q: %v", cp, err)
	}
	_, size, root, err := chain.ParseCheckpoint(signed.Text)
	if err != nil || size != 3 {
		t.Fatalf("checkpoint %q: size %d %v", signed.Text, size, err)
	}
	ip, err := c.InclusionProof(ctx, "main", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := c.GetEvent(ctx, "main", 2)
	if err != nil {
		t.Fatal(err)
	}
	leaf := tlog.LeafHash(chain.Leaf(chain.Attestation{PI: e2.EntityID, Ver: e2.Ver, CID: e2.CID, Op: e2.Op, Vis: e2.Vis, TS: e2.TS, PrevTx: e2.PrevTx, PrevCID: e2.PrevCID, Seq: e2.Seq}))
	if err := tlog.VerifyInclusion(leaf, 1, 3, hashes(t, ip.Hashes), root); err != nil {
		t.Fatalf("inclusion proof: %v", err)
	}
	cpf, err := c.ConsistencyProof(ctx, "main", 1, 3)
	if err != nil || cpf.From != 1 || cpf.To != 3 || len(cpf.Hashes) == 0 {
		t.Fatalf("consistency proof: %+v %v", cpf, err)
	}
	_, err = c.InclusionProof(ctx, "main", 2, 9)
	wantCode(t, err, http.StatusBadRequest, "invalid_request")

	n2, err := c.RetryChain(ctx, "main")
	if err != nil || n2 != 0 {
		t.Fatalf("retry: %d %v", n2, err)
	}
	_, err = noToken.RetryChain(ctx, "main")
	wantCode(t, err, http.StatusUnauthorized, "unauthorized")
}

func hashes(t *testing.T, b64 []string) []tlog.Hash {
	t.Helper()
	out := make([]tlog.Hash, len(b64))
	for i, s := range b64 {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != len(out[i]) {
			t.Fatalf("proof hash %q: %v", s, err)
		}
		copy(out[i][:], b)
	}
	return out
}
