package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/node/nodetest"
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
	var cfg config.Config
	n := nodetest.Start(t, func(c *config.Config) {
		if mutate != nil {
			mutate(c)
		}
		cfg = *c
	})
	return &testNode{Node: n, URL: "http://" + n.HTTPAddr(), Cfg: cfg}
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
