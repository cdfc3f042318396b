// Package apitest runs an in-process node (node/nodetest: every service of the binary, real
// Raft and Pebble) for tests of the HTTP API, and sends it requests.
package apitest

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

// Node is a one-node server on loopback with a fresh data directory.
type Node struct {
	*node.Node
	URL    string
	Config config.Config
}

// Start starts a node; mutate adjusts the configuration (short TTLs, an admin token, a
// service's settings through its Section).
func Start(t testing.TB, mutate func(*config.Config)) *Node {
	t.Helper()
	var cfg config.Config
	n := nodetest.Start(t, func(c *config.Config) {
		if mutate != nil {
			mutate(c)
		}
		cfg = *c
	})
	return &Node{Node: n, URL: "http://" + n.HTTPAddr(), Config: cfg}
}

// Response is a read HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ErrorCode is the "error" field of an error body ("" if none).
func (r Response) ErrorCode() string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error
}

// Do sends a request; body may be nil, a string or []byte (sent as is) or any value (sent as
// JSON); header holds name, value pairs.
func (n *Node) Do(t testing.TB, method, path string, body any, header ...string) Response {
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
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
