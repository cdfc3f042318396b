package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
)

// testNode is an in-process one-node server on loopback with a fresh data directory.
type testNode struct {
	*node.Node
	URL string
	Cfg config.Config
}

// startNode starts a node; mutate adjusts the configuration (short TTLs, admin token...).
func startNode(t testing.TB, mutate func(*config.Config)) *testNode {
	t.Helper()
	cfg := config.Default()
	cfg.NodeID = "test"
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.RemoteAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Partitions = 4
	cfg.RaftHeartbeatTimeout, cfg.RaftElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
	cfg.LogLevel = "error"
	cfg.ShutdownDrain = 0 // nothing to drain in a test
	if mutate != nil {
		mutate(&cfg)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	n, err := node.Start(cfg, node.Options{Logger: logger, Kinds: api.Kinds(cfg),
		Routes: func(mux *http.ServeMux, c api.Caller) { api.Register(mux, c, cfg) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	tn := &testNode{Node: n, URL: "http://" + n.HTTPAddr(), Cfg: cfg}
	deadline := time.Now().Add(10 * time.Second)
	for n.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("node not ready: %v", n.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return tn
}

// response is a decoded HTTP response.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ErrorCode is the "error" field of an error body ("" if none).
func (r response) ErrorCode() string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error
}

// do sends a request; body may be nil, a string/[]byte (sent raw) or any value (sent as JSON).
func (n *testNode) do(t testing.TB, method, path string, body any, header ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, n.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
