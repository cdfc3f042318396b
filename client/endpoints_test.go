package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"testing"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	method, path, auth, contentType string
	body                            []byte
}

func ptr[T any](v T) *T { return &v }

// TestEndpoints checks every call against the contract: method, path, the exact JSON body
// (field names included), the admin token, and the decoding of the answer.
func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name     string
		call     func(context.Context, *Client) (any, error)
		method   string
		path     string
		body     string // exact JSON expected ("" for none)
		admin    bool
		status   int
		response string
		want     any
	}{
		{"register device new", func(ctx context.Context, c *Client) (any, error) {
			return c.RegisterDevice(ctx, "fleet", RegisterDeviceRequest{DeviceID: "d-1", Version: "1.2", Platform: "ios", BuildHash: "abc", PublicKey: []byte{1, 2, 3}})
		}, "POST", "/v1/attest/fleet/register",
			`{"device_id":"d-1","version":"1.2","platform":"ios","build_hash":"abc","public_key":"AQID"}`, false,
			201, `{"device_id":"d-1","registered_at":10,"last_seen":11}`,
			&Registration{DeviceID: "d-1", RegisteredAt: 10, LastSeen: 11, Created: true}},
		{"register device again", func(ctx context.Context, c *Client) (any, error) {
			return c.RegisterDevice(ctx, "fleet", RegisterDeviceRequest{DeviceID: "d-1", PublicKey: []byte{1}})
		}, "POST", "/v1/attest/fleet/register",
			`{"device_id":"d-1","version":"","platform":"","build_hash":"","public_key":"AQ=="}`, false,
			200, `{"device_id":"d-1","registered_at":10,"last_seen":12}`,
			&Registration{DeviceID: "d-1", RegisteredAt: 10, LastSeen: 12}},
		{"rotate device key", func(ctx context.Context, c *Client) (any, error) {
			return c.RotateDeviceKey(ctx, "fleet", RegisterDeviceRequest{DeviceID: "d-1", Version: "1.3", Platform: "ios", BuildHash: "abd", PublicKey: []byte{4, 5, 6}})
		}, "POST", "/v1/attest/fleet/register",
			`{"device_id":"d-1","version":"1.3","platform":"ios","build_hash":"abd","public_key":"BAUG"}`, true,
			200, `{"device_id":"d-1","registered_at":10,"last_seen":13}`,
			&Registration{DeviceID: "d-1", RegisteredAt: 10, LastSeen: 13}},
		{"challenge", func(ctx context.Context, c *Client) (any, error) {
			return c.Challenge(ctx, "fleet", "d-1")
		}, "POST", "/v1/attest/fleet/challenge", `{"device_id":"d-1"}`, false,
			200, `{"nonce":"abc_-","expires_at":99}`, &Challenge{Nonce: "abc_-", ExpiresAt: 99}},
		{"verify", func(ctx context.Context, c *Client) (any, error) {
			return c.Verify(ctx, "fleet", VerifyRequest{DeviceID: "d-1", Nonce: "abc", Signature: []byte{0xff, 0xfe}, RequestID: "v1"})
		}, "POST", "/v1/attest/fleet/verify", `{"device_id":"d-1","nonce":"abc","signature":"//4=","request_id":"v1"}`, false,
			200, `{"verified":true,"device_id":"d-1","verified_at":50}`,
			&Verification{Verified: true, DeviceID: "d-1", VerifiedAt: 50}},
		{"get device", func(ctx context.Context, c *Client) (any, error) {
			return c.GetDevice(ctx, "fleet", "d-1")
		}, "GET", "/v1/attest/fleet/devices/d-1", "", false,
			200, `{"device_id":"d-1","version":"1.2","platform":"ios","build_hash":"abc","registered_at":10,"last_seen":50,"pending_challenges":2}`,
			&Device{DeviceID: "d-1", Version: "1.2", Platform: "ios", BuildHash: "abc", RegisteredAt: 10, LastSeen: 50, PendingChallenges: 2}},
		{"delete device", func(ctx context.Context, c *Client) (any, error) {
			return nil, c.DeleteDevice(ctx, "fleet", "d-1")
		}, "DELETE", "/v1/attest/fleet/devices/d-1", "", true, 204, "", nil},
		{"put server new", func(ctx context.Context, c *Client) (any, error) {
			return c.PutServer(ctx, "edge", "s-1", PutServerRequest{Address: "10.0.0.1:443", Region: "eu", Meta: json.RawMessage(`{"v":1}`)})
		}, "PUT", "/v1/servers/edge/s-1", `{"address":"10.0.0.1:443","region":"eu","meta":{"v":1}}`, false,
			201, `{"server_id":"s-1","registered_at":5,"last_seen":5}`,
			&Heartbeat{ServerID: "s-1", RegisteredAt: 5, LastSeen: 5, Created: true}},
		{"put server heartbeat without optional fields", func(ctx context.Context, c *Client) (any, error) {
			return c.PutServer(ctx, "edge", "s-1", PutServerRequest{Address: "10.0.0.1:443"})
		}, "PUT", "/v1/servers/edge/s-1", `{"address":"10.0.0.1:443"}`, false,
			200, `{"server_id":"s-1","registered_at":5,"last_seen":8}`,
			&Heartbeat{ServerID: "s-1", RegisteredAt: 5, LastSeen: 8}},
		{"list servers", func(ctx context.Context, c *Client) (any, error) {
			return c.ListServers(ctx, "edge")
		}, "GET", "/v1/servers/edge", "", false,
			200, `{"servers":[{"server_id":"s-1","address":"a","region":"eu","meta":{"v":1},"registered_at":5,"last_seen":8}]}`,
			[]Server{{ServerID: "s-1", Address: "a", Region: "eu", Meta: json.RawMessage(`{"v":1}`), RegisteredAt: 5, LastSeen: 8}}},
		{"delete server", func(ctx context.Context, c *Client) (any, error) {
			return nil, c.DeleteServer(ctx, "edge", "s-1")
		}, "DELETE", "/v1/servers/edge/s-1", "", true, 204, "", nil},
		{"issue nonce", func(ctx context.Context, c *Client) (any, error) {
			return c.IssueNonce(ctx, "acme")
		}, "POST", "/v1/nonces", `{"org_id":"acme"}`, false,
			201, `{"nonce":"n1","org_id":"acme","issued_at":1,"expires_at":2}`,
			&Nonce{Nonce: "n1", OrgID: "acme", IssuedAt: 1, ExpiresAt: 2}},
		{"consume nonce", func(ctx context.Context, c *Client) (any, error) {
			return c.ConsumeNonce(ctx, "n1", ConsumeRequest{OrgID: "acme", RequestID: "r-1"})
		}, "POST", "/v1/nonces/n1/consume", `{"org_id":"acme","request_id":"r-1"}`, false,
			200, `{"nonce":"n1","used_at":3}`, &Consumed{Nonce: "n1", UsedAt: 3}},
		{"get unused nonce", func(ctx context.Context, c *Client) (any, error) {
			return c.GetNonce(ctx, "n1")
		}, "GET", "/v1/nonces/n1", "", false,
			200, `{"nonce":"n1","org_id":"acme","issued_at":1,"expires_at":2,"used_at":null}`,
			&Nonce{Nonce: "n1", OrgID: "acme", IssuedAt: 1, ExpiresAt: 2}},
		{"get used nonce", func(ctx context.Context, c *Client) (any, error) {
			return c.GetNonce(ctx, "n1")
		}, "GET", "/v1/nonces/n1", "", false,
			200, `{"nonce":"n1","org_id":"acme","issued_at":1,"expires_at":2,"used_at":3}`,
			&Nonce{Nonce: "n1", OrgID: "acme", IssuedAt: 1, ExpiresAt: 2, UsedAt: ptr(int64(3))}},
		{"healthz", func(ctx context.Context, c *Client) (any, error) {
			return nil, c.Healthz(ctx)
		}, "GET", "/healthz", "", false, 200, `{"status":"ok"}`, nil},
		{"readyz", func(ctx context.Context, c *Client) (any, error) {
			return nil, c.Readyz(ctx)
		}, "GET", "/readyz", "", false, 200, `{"status":"ready"}`, nil},
		{"cluster", func(ctx context.Context, c *Client) (any, error) {
			return c.Cluster(ctx)
		}, "GET", "/v1/cluster", "", false,
			200, `{"node_id":"n1","members":[{"node_id":"n1","state":"alive","http_addr":"127.0.0.1:8080"}],"partitions":[{"id":0,"leader":"n1","replicas":["n1"],"applied_index":7}]}`,
			&ClusterStatus{NodeID: "n1", Members: []Member{{NodeID: "n1", State: "alive", HTTPAddr: "127.0.0.1:8080"}},
				Partitions: []Partition{{ID: 0, Leader: "n1", Replicas: []string{"n1"}, AppliedIndex: 7}}}},
		{"cluster with every field", func(ctx context.Context, c *Client) (any, error) {
			return c.Cluster(ctx)
		}, "GET", "/v1/cluster", "", false,
			200, `{"node_id":"n1","members":[{"node_id":"n2","server_id":"n2@x1","state":"suspect","state_since":5,"http_addr":"h:1"}],` +
				`"partitions":[{"id":3,"leader":"n1","replicas":["n1","n2"],"voters":["n1"],"non_voters":["n2"],"applied_index":9,"lag":{"n2":4},"under_replicated":true}]}`,
			&ClusterStatus{NodeID: "n1", Members: []Member{{NodeID: "n2", ServerID: "n2@x1", State: "suspect", StateSince: 5, HTTPAddr: "h:1"}},
				Partitions: []Partition{{ID: 3, Leader: "n1", Replicas: []string{"n1", "n2"}, Voters: []string{"n1"}, NonVoters: []string{"n2"},
					AppliedIndex: 9, Lag: map[string]uint64{"n2": 4}, UnderReplicated: true}}}},
		{"path segments are escaped", func(ctx context.Context, c *Client) (any, error) {
			return c.GetDevice(ctx, "a/b", "c d")
		}, "GET", "/v1/attest/a%2Fb/devices/c%20d", "", false,
			200, `{"device_id":"c d"}`, &Device{DeviceID: "c d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got recorded
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got = recorded{method: r.Method, path: r.URL.EscapedPath(), auth: r.Header.Get("Authorization"),
					contentType: r.Header.Get("Content-Type"), body: body}
				if tc.response != "" {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.response)
			}))
			defer srv.Close()
			c, _ := newTestClient(t, []string{srv.URL}, NoRetry, 0.5, WithAdminToken("s3cret"))
			res, err := tc.call(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if got.method != tc.method || got.path != tc.path {
				t.Errorf("sent %s %s, want %s %s", got.method, got.path, tc.method, tc.path)
			}
			if string(got.body) != tc.body {
				t.Errorf("body %s, want %s", got.body, tc.body)
			}
			if (tc.body != "") != (got.contentType == "application/json") {
				t.Errorf("Content-Type %q with body %q", got.contentType, got.body)
			}
			if wantAuth := map[bool]string{true: "Bearer s3cret"}[tc.admin]; got.auth != wantAuth {
				t.Errorf("Authorization %q, want %q", got.auth, wantAuth)
			}
			if tc.want != nil && !reflect.DeepEqual(res, tc.want) {
				t.Errorf("result %+v, want %+v", res, tc.want)
			}
		})
	}
}

// identifier is the contract's identifier and nonce pattern.
var identifier = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func TestConsumeGeneratesRequestIDInIdentifierAlphabet(t *testing.T) {
	c, err := New([]string{"http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 100 {
		id := c.requestID()
		if !identifier.MatchString(id) || seen[id] {
			t.Fatalf("request id %q invalid or repeated", id)
		}
		seen[id] = true
	}
}
