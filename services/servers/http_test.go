package servers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/servers"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// serversList is the body of GET /v1/servers/{registry} and GET /servers.
type serversList struct {
	Servers []struct {
		ServerID     string          `json:"server_id"`
		Address      string          `json:"address"`
		Region       string          `json:"region"`
		Meta         json.RawMessage `json:"meta"`
		RegisteredAt int64           `json:"registered_at"`
		LastSeen     int64           `json:"last_seen"`
	} `json:"servers"`
}

// serversRegistered is the body of a successful registration.
type serversRegistered struct {
	ServerID     string `json:"server_id"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
}

// serversIDs lists the server ids of a list apitest.Response, in order.
func serversIDs(t testing.TB, r apitest.Response) string {
	t.Helper()
	var l serversList
	r.JSON(t, &l)
	if l.Servers == nil {
		t.Fatalf("servers is not an array: %s", r.Body)
	}
	ids := make([]string, len(l.Servers))
	for i, s := range l.Servers {
		ids[i] = s.ServerID
	}
	return strings.Join(ids, ",")
}

// TestServersAPI walks every row and error code of the server registry contract, in order,
// on one node (admin token "secret", max_servers 2 so that registry_full is reachable).
func TestServersAPI(t *testing.T) {
	n := apitest.Start(t, func(c *config.Config) {
		c.AdminToken = "secret"
		servers.Settings.Update(c, func(o *servers.Config) { o.MaxServers, o.TTL = 2, time.Minute })
	})
	admin := []string{"Authorization", "Bearer secret"}
	bigMeta := `{"k":"` + strings.Repeat("x", servers.MaxMetaBytes) + `"}`
	var first serversRegistered // the reply to the first registration of s1

	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		header []string
		status int
		code   string                             // error code, "" on success
		check  func(*testing.T, apitest.Response) // further checks of a success
	}{
		{name: "register new", method: "PUT", path: "/v1/servers/reg1/s1",
			body: `{"address":"10.0.0.1:443","region":"eu","meta":{"v":1, "tags":["a"]}}`, status: 201,
			check: func(t *testing.T, r apitest.Response) {
				r.JSON(t, &first)
				if first.ServerID != "s1" || first.RegisteredAt == 0 || first.LastSeen != first.RegisteredAt {
					t.Fatalf("registration %s", r.Body)
				}
			}},
		{name: "heartbeat", method: "PUT", path: "/v1/servers/reg1/s1", body: `{"address":"10.0.0.9:443"}`, status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var got serversRegistered
				r.JSON(t, &got)
				if got.ServerID != "s1" || got.RegisteredAt != first.RegisteredAt || got.LastSeen < first.LastSeen {
					t.Fatalf("heartbeat %s after %+v", r.Body, first)
				}
			}},
		{name: "list shows the heartbeat's fields", method: "GET", path: "/v1/servers/reg1", status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var l serversList
				r.JSON(t, &l)
				if len(l.Servers) != 1 {
					t.Fatalf("list %s", r.Body)
				}
				s := l.Servers[0]
				if s.ServerID != "s1" || s.Address != "10.0.0.9:443" || s.Region != "" || string(s.Meta) != "{}" ||
					s.RegisteredAt != first.RegisteredAt || s.LastSeen < first.LastSeen {
					t.Fatalf("list %s", r.Body)
				}
			}},
		{name: "register with region and meta", method: "PUT", path: "/v1/servers/reg1/s2",
			body: `{"address":"10.0.0.2:443","region":"us","meta":{ "a" : 1 }}`, status: 201},
		{name: "list in server_id order with meta compacted", method: "GET", path: "/v1/servers/reg1", status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var l serversList
				r.JSON(t, &l)
				if len(l.Servers) != 2 || l.Servers[1].ServerID != "s2" || l.Servers[1].Region != "us" ||
					string(l.Servers[1].Meta) != `{"a":1}` || serversIDs(t, r) != "s1,s2" {
					t.Fatalf("list %s", r.Body)
				}
			}},
		{name: "registry full", method: "PUT", path: "/v1/servers/reg1/s3", body: `{"address":"x"}`,
			status: 503, code: "registry_full"},
		{name: "heartbeat of a member of a full registry", method: "PUT", path: "/v1/servers/reg1/s2",
			body: `{"address":"10.0.0.2:443"}`, status: 200},
		{name: "never used registry lists empty", method: "GET", path: "/v1/servers/unused", status: 200,
			check: func(t *testing.T, r apitest.Response) {
				if strings.TrimSpace(string(r.Body)) != `{"servers":[]}` {
					t.Fatalf("list %s", r.Body)
				}
			}},
		{name: "list invalid registry", method: "GET", path: "/v1/servers/bad.name", status: 400, code: "invalid_id"},
		{name: "invalid registry", method: "PUT", path: "/v1/servers/bad.name/s1", body: `{"address":"x"}`, status: 400, code: "invalid_id"},
		{name: "registry too long", method: "PUT", path: "/v1/servers/" + strings.Repeat("r", 65) + "/s1",
			body: `{"address":"x"}`, status: 400, code: "invalid_id"},
		{name: "invalid server_id", method: "PUT", path: "/v1/servers/reg1/s%2F1", body: `{"address":"x"}`, status: 400, code: "invalid_id"},
		{name: "address too long", method: "PUT", path: "/v1/servers/reg1/s1", body: `{"address":"` + strings.Repeat("a", 257) + `"}`, status: 400, code: "invalid_request"},
		{name: "region too long", method: "PUT", path: "/v1/servers/reg1/s1", body: `{"address":"x","region":"` + strings.Repeat("r", 65) + `"}`, status: 400, code: "invalid_request"},
		{name: "server_id too long", method: "PUT", path: "/v1/servers/reg1/" + strings.Repeat("s", 65),
			body: `{"address":"x"}`, status: 400, code: "invalid_id"},
		{name: "server_id of 64", method: "PUT", path: "/v1/servers/reg2/" + strings.Repeat("s", 64),
			body: `{"address":"x"}`, status: 201},
		{name: "missing address", method: "PUT", path: "/v1/servers/reg2/s1", body: `{"region":"eu"}`, status: 400, code: "invalid_request"},
		{name: "unknown field", method: "PUT", path: "/v1/servers/reg2/s1", body: `{"address":"x","port":1}`, status: 400, code: "invalid_request"},
		{name: "malformed JSON", method: "PUT", path: "/v1/servers/reg2/s1", body: `{"address":`, status: 400, code: "invalid_request"},
		{name: "address not a string", method: "PUT", path: "/v1/servers/reg2/s1", body: `{"address":1}`, status: 400, code: "invalid_request"},
		{name: "meta not an object", method: "PUT", path: "/v1/servers/reg2/s1", body: `{"address":"x","meta":[1]}`, status: 400, code: "invalid_request"},
		{name: "meta over 4 KiB", method: "PUT", path: "/v1/servers/reg2/s1", body: `{"address":"x","meta":` + bigMeta + `}`,
			status: 400, code: "invalid_request"},
		{name: "body over 64 KiB", method: "PUT", path: "/v1/servers/reg2/s1",
			body: `{"address":"` + strings.Repeat("x", 65<<10) + `"}`, status: 413, code: "body_too_large"},
		{name: "delete without token", method: "DELETE", path: "/v1/servers/reg1/s1", status: 401, code: "unauthorized"},
		{name: "delete with a wrong token", method: "DELETE", path: "/v1/servers/reg1/s1",
			header: []string{"Authorization", "Bearer wrong"}, status: 401, code: "unauthorized"},
		{name: "delete", method: "DELETE", path: "/v1/servers/reg1/s1", header: admin, status: 204},
		{name: "delete again", method: "DELETE", path: "/v1/servers/reg1/s1", header: admin, status: 404, code: "unknown_server"},
		{name: "delete never registered", method: "DELETE", path: "/v1/servers/unused/s1", header: admin, status: 404, code: "unknown_server"},
		{name: "delete invalid server_id", method: "DELETE", path: "/v1/servers/reg1/s.1", header: admin, status: 400, code: "invalid_id"},
		{name: "delete invalid registry", method: "DELETE", path: "/v1/servers/r.1/s1", header: admin, status: 400, code: "invalid_id"},
		{name: "deletion frees a slot", method: "PUT", path: "/v1/servers/reg1/s3", body: `{"address":"x"}`, status: 201},
		{name: "list after delete", method: "GET", path: "/v1/servers/reg1", status: 200,
			check: func(t *testing.T, r apitest.Response) {
				if got := serversIDs(t, r); got != "s2,s3" {
					t.Fatalf("servers %s, want s2,s3", got)
				}
			}},
		{name: "compat register", method: "POST", path: "/servers", body: `{"serverId":"c1","address":"10.1.0.1:80","region":"ap"}`, status: 201,
			check: func(t *testing.T, r apitest.Response) {
				var got serversRegistered
				r.JSON(t, &got)
				if got.ServerID != "c1" || got.RegisteredAt == 0 || got.LastSeen != got.RegisteredAt {
					t.Fatalf("registration %s", r.Body)
				}
			}},
		{name: "compat heartbeat", method: "POST", path: "/servers", body: `{"serverId":"c1","address":"10.1.0.1:80","meta":{"x":true}}`, status: 200},
		{name: "compat list", method: "GET", path: "/servers", status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var l serversList
				r.JSON(t, &l)
				if len(l.Servers) != 1 || l.Servers[0].ServerID != "c1" || string(l.Servers[0].Meta) != `{"x":true}` {
					t.Fatalf("list %s", r.Body)
				}
			}},
		{name: "compat is registry default", method: "GET", path: "/v1/servers/default", status: 200,
			check: func(t *testing.T, r apitest.Response) {
				if got := serversIDs(t, r); got != "c1" {
					t.Fatalf("servers %s, want c1", got)
				}
			}},
		{name: "compat missing serverId", method: "POST", path: "/servers", body: `{"address":"x"}`, status: 400, code: "invalid_request"},
		{name: "compat invalid serverId", method: "POST", path: "/servers", body: `{"serverId":"a b","address":"x"}`, status: 400, code: "invalid_id"},
		{name: "compat snake_case server_id is unknown", method: "POST", path: "/servers", body: `{"server_id":"c2","address":"x"}`,
			status: 400, code: "invalid_request"},
		{name: "compat missing address", method: "POST", path: "/servers", body: `{"serverId":"c2"}`, status: 400, code: "invalid_request"},
		{name: "compat meta over 4 KiB", method: "POST", path: "/servers", body: `{"serverId":"c2","address":"x","meta":` + bigMeta + `}`,
			status: 400, code: "invalid_request"},
		{name: "compat body over 64 KiB", method: "POST", path: "/servers",
			body: `{"serverId":"c2","address":"` + strings.Repeat("x", 65<<10) + `"}`, status: 413, code: "body_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.Do(t, tc.method, tc.path, tc.body, tc.header...)
			if r.Status != tc.status || r.ErrorCode() != tc.code {
				t.Fatalf("%s %s: %d %s, want %d %q", tc.method, tc.path, r.Status, r.Body, tc.status, tc.code)
			}
			if tc.status == 503 {
				if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
					t.Fatalf("Retry-After %q, want 1..60 s (the oldest entry expires within the 1 min TTL)", r.Header.Get("Retry-After"))
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestServersAdminDisabled: without an admin token the admin endpoint answers 403.
func TestServersAdminDisabled(t *testing.T) {
	n := apitest.Start(t, nil)
	if r := n.Do(t, "PUT", "/v1/servers/reg/s1", `{"address":"x"}`); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	for _, header := range [][]string{nil, {"Authorization", "Bearer x"}} {
		if r := n.Do(t, "DELETE", "/v1/servers/reg/s1", nil, header...); r.Status != 403 || r.ErrorCode() != "admin_disabled" {
			t.Fatalf("delete with %v: %d %s", header, r.Status, r.Body)
		}
	}
}

// TestServersTTL: the list shows only entries seen within server_ttl; a full registry
// answers 503 registry_full with Retry-After, and an entry that expired frees its slot while
// one kept alive by heartbeats does not.
func TestServersTTL(t *testing.T) {
	n := apitest.Start(t, func(c *config.Config) {
		// A TTL long enough for a loaded machine to keep b alive.
		servers.Settings.Update(c, func(o *servers.Config) { o.TTL, o.MaxServers = time.Second, 2 })
	})
	for _, id := range []string{"a", "b"} {
		if r := n.Do(t, "PUT", "/v1/servers/ttl/"+id, `{"address":"x"}`); r.Status != 201 {
			t.Fatalf("register %s: %d %s", id, r.Status, r.Body)
		}
	}
	if got := serversIDs(t, n.Do(t, "GET", "/v1/servers/ttl", nil)); got != "a,b" {
		t.Fatalf("servers %s, want a,b", got)
	}
	r := n.Do(t, "PUT", "/v1/servers/ttl/c", `{"address":"x"}`)
	if r.Status != 503 || r.ErrorCode() != "registry_full" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("register c into a full registry: %d %s Retry-After %q", r.Status, r.Body, r.Header.Get("Retry-After"))
	}

	// Keep b alive with heartbeats until a has expired from the list.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := n.Do(t, "PUT", "/v1/servers/ttl/b", `{"address":"x"}`); r.Status != 200 {
			t.Fatalf("heartbeat b: %d %s", r.Status, r.Body)
		}
		got := serversIDs(t, n.Do(t, "GET", "/v1/servers/ttl", nil))
		if got == "b" {
			break
		}
		if got != "a,b" || time.Now().After(deadline) {
			t.Fatalf("servers %s while a expires", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := n.Do(t, "PUT", "/v1/servers/ttl/c", `{"address":"x"}`); r.Status != 201 {
		t.Fatalf("register c after a expired: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "PUT", "/v1/servers/ttl/d", `{"address":"x"}`); r.Status != 503 || r.ErrorCode() != "registry_full" {
		t.Fatalf("register d into a registry of live b and c: %d %s", r.Status, r.Body)
	}
	// An expired server coming back is registered anew.
	await.True(t, 10*time.Second, "every entry to expire", func() bool {
		return serversIDs(t, n.Do(t, "GET", "/v1/servers/ttl", nil)) == ""
	})
	r = n.Do(t, "PUT", "/v1/servers/ttl/a", `{"address":"x"}`)
	if r.Status != 201 {
		t.Fatalf("re-register a: %d %s", r.Status, r.Body)
	}
	var reg serversRegistered
	if r.JSON(t, &reg); reg.RegisteredAt != reg.LastSeen {
		t.Fatalf("re-registered a kept its old registered_at: %s", r.Body)
	}
}

// TestServersBoundedStorage is the acceptance test of bounded storage: 10,000 servers' worth of
// heartbeats from rotating ids, sent by concurrent clients with a 1 s TTL, leave nothing
// behind: once the TTL has passed (and no request arrives), the gc alarm brings the
// registry's partition back to the key count of an empty registry.
func TestServersBoundedStorage(t *testing.T) {
	const (
		ids        = 10_000
		heartbeats = 2 // per id: the first registers it, the next renew it
		clients    = 32
		ttl        = time.Second
		registry   = "fleet"
	)
	n := apitest.Start(t, func(c *config.Config) {
		servers.Settings.Update(c, func(o *servers.Config) { o.TTL, o.MaxServers = ttl, ids })
	})
	part := actors.PartitionOf(servers.KindName, registry, n.Config.Partitions)
	keys := func() int {
		c, err := n.Store().KeyCount(part, []byte{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	baseline := keys() // an empty registry: its collected entries leave no key behind

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	put := func(id int) (int, error) {
		body := fmt.Sprintf(`{"address":"10.%d.%d.1:443","region":"r%d"}`, id/256, id%256, id%5)
		req, err := http.NewRequest("PUT", fmt.Sprintf("%s/v1/servers/%s/srv-%05d", n.URL, registry, id), strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != 200 && resp.StatusCode != 201 {
			err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		}
		return resp.StatusCode, err
	}

	start := time.Now()
	var created, renewed, peak atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int)
	for range clients {
		wg.Go(func() {
			for id := range next {
				for h := range heartbeats {
					status, err := put(id)
					if err != nil {
						t.Errorf("heartbeat %d of srv-%05d: %v", h, id, err)
						return
					}
					if h == 0 && status != 201 {
						t.Errorf("first registration of srv-%05d: status %d", id, status)
					}
					if status == 201 {
						created.Add(1)
					} else {
						renewed.Add(1)
					}
				}
			}
		})
	}
	for id := range ids {
		next <- id
		if id%1000 == 0 {
			if k := int64(keys()); k > peak.Load() {
				peak.Store(k)
			}
		}
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	sent := time.Since(start)
	if peak.Load() <= int64(baseline) {
		t.Fatalf("the load never raised the key count above the baseline %d", baseline)
	}

	// No requests from here on: only alarms may bring the count back.
	stop := time.Now()
	await.True(t, 30*time.Second, fmt.Sprintf("the registry's keys to return to the baseline %d", baseline),
		func() bool { return keys() == baseline })
	t.Logf("%d heartbeats (%d new, %d renewals) from %d clients in %v (%.0f/s); peak %d keys sampled; "+
		"back to the baseline of %d keys %v after the last heartbeat (TTL %v)",
		ids*heartbeats, created.Load(), renewed.Load(), clients, sent.Round(time.Millisecond),
		float64(ids*heartbeats)/sent.Seconds(), peak.Load(), baseline, time.Since(stop).Round(time.Millisecond), ttl)
	if got := serversIDs(t, n.Do(t, "GET", "/v1/servers/"+registry, nil)); got != "" {
		t.Fatalf("servers listed after every entry expired: %s", got)
	}
}

// Registry names are bounded cluster-wide (--max-registries): a new name past the bound is
// refused, while registries that exist go on taking writes, and invalid writes mint no name.
func TestRegistryNamesAreBounded(t *testing.T) {
	n := apitest.Start(t, func(c *config.Config) { c.MaxRegistries = 2 })
	body := `{"address":"10.0.0.1:443"}`
	if r := n.Do(t, "PUT", "/v1/servers/bad/s1", `{"address":""}`); r.Status != 400 {
		t.Fatalf("invalid registration: %d %s", r.Status, r.Body)
	}
	for _, reg := range []string{"r1", "r2"} {
		if r := n.Do(t, "PUT", "/v1/servers/"+reg+"/s1", body); r.Status != 201 {
			t.Fatalf("registry %s: %d %s", reg, r.Status, r.Body)
		}
	}
	r := n.Do(t, "PUT", "/v1/servers/r3/s1", body)
	if r.Status != 503 || r.ErrorCode() != "registry_full" || !strings.Contains(string(r.Body), "server registries") {
		t.Fatalf("a third registry: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "PUT", "/v1/servers/r1/s2", body); r.Status != 201 {
		t.Fatalf("a write to an existing registry: %d %s", r.Status, r.Body)
	}
	// The bound is per kind: device registries count apart.
	if r := n.Do(t, "POST", "/v1/attest/r3/register", map[string]string{"device_id": "d1", "version": "1", "platform": "p",
		"build_hash": "h", "public_key": "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}); r.Status != 201 {
		t.Fatalf("a device registry: %d %s", r.Status, r.Body)
	}
}
