package servers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/servers"
)

// writeToken writes token to a file of mode perm and returns its path.
func writeToken(t *testing.T, token string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "servers-token")
	if err := os.WriteFile(p, []byte(token), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return p
}

// With --servers-token-file, registrations and heartbeats need that token — a missing or
// wrong one (the admin token included) is 401 unauthorized and writes nothing — while the
// lists need none and the delete keeps needing the admin token.
func TestServersToken(t *testing.T) {
	const token, adminToken = "servers-token-of-the-fleet-0123456789", "admin-token"
	file := writeToken(t, " "+token+"\n", 0o600)
	n := apitest.Start(t, func(c *config.Config) {
		c.AdminToken = adminToken
		servers.Settings.Update(c, func(o *servers.Config) {
			o.TokenFile = file
			if err := o.Load(); err != nil {
				t.Fatal(err)
			}
		})
	})
	bearer := func(t string) []string { return []string{"Authorization", "Bearer " + t} }
	lists := func(t *testing.T, path, want string) {
		t.Helper()
		r := n.Do(t, "GET", path, nil) // no token: reads are open
		if r.Status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		if got := serversIDs(t, r); got != want {
			t.Fatalf("GET %s lists %q, want %q", path, got, want)
		}
	}
	refused := []struct {
		name   string
		header []string
	}{
		{"no token", nil},
		{"a wrong token", bearer("wrong")},
		{"the token with a suffix", bearer(token + "x")},
		{"the admin token", bearer(adminToken)},
		{"the token without Bearer", []string{"Authorization", token}},
	}
	for _, c := range refused {
		t.Run("put with "+c.name, func(t *testing.T) {
			r := n.Do(t, "PUT", "/v1/servers/tok/s1", `{"address":"10.0.0.1:443"}`, c.header...)
			if r.Status != 401 || r.ErrorCode() != "unauthorized" || strings.Contains(string(r.Body), token) {
				t.Fatalf("%d %s, want 401 unauthorized", r.Status, r.Body)
			}
			lists(t, "/v1/servers/tok", "")
		})
		t.Run("compat post with "+c.name, func(t *testing.T) {
			r := n.Do(t, "POST", "/servers", `{"serverId":"c1","address":"10.0.0.1:443"}`, c.header...)
			if r.Status != 401 || r.ErrorCode() != "unauthorized" {
				t.Fatalf("%d %s, want 401 unauthorized", r.Status, r.Body)
			}
			lists(t, "/servers", "")
		})
	}
	// An invalid body is refused for its token first: nothing about it is answered.
	if r := n.Do(t, "PUT", "/v1/servers/bad.name/s1", `{}`); r.Status != 401 {
		t.Fatalf("an invalid write without the token: %d %s, want 401", r.Status, r.Body)
	}

	for _, step := range []struct {
		method, path, body string
		status             int
	}{
		{"PUT", "/v1/servers/tok/s1", `{"address":"10.0.0.1:443"}`, 201},
		{"PUT", "/v1/servers/tok/s1", `{"address":"10.0.0.1:443"}`, 200},
		{"PUT", "/v1/servers/tok/s2", `{"address":"10.0.0.2:443"}`, 201},
		{"POST", "/servers", `{"serverId":"c1","address":"10.0.0.3:443"}`, 201},
	} {
		if r := n.Do(t, step.method, step.path, step.body, bearer(token)...); r.Status != step.status {
			t.Fatalf("%s %s with the token: %d %s, want %d", step.method, step.path, r.Status, r.Body, step.status)
		}
	}
	lists(t, "/v1/servers/tok", "s1,s2")
	lists(t, "/servers", "c1")

	if r := n.Do(t, "DELETE", "/v1/servers/tok/s1", nil, bearer(token)...); r.Status != 401 || r.ErrorCode() != "unauthorized" {
		t.Fatalf("delete with the servers token: %d %s, want 401 (an admin endpoint)", r.Status, r.Body)
	}
	if r := n.Do(t, "DELETE", "/v1/servers/tok/s1", nil, bearer(adminToken)...); r.Status != 204 {
		t.Fatalf("delete with the admin token: %d %s", r.Status, r.Body)
	}
	lists(t, "/v1/servers/tok", "s2")
}

// Without --servers-token-file, writes are open: an Authorization header changes nothing.
func TestServersWithoutToken(t *testing.T) {
	n := apitest.Start(t, nil)
	for i, header := range [][]string{nil, {"Authorization", "Bearer anything"}} {
		if r := n.Do(t, "PUT", "/v1/servers/open/s1", `{"address":"x"}`, header...); r.Status != []int{201, 200}[i] {
			t.Fatalf("put with %q: %d %s", header, r.Status, r.Body)
		}
	}
	if r := n.Do(t, "POST", "/servers", `{"serverId":"c1","address":"x"}`); r.Status != 201 {
		t.Fatalf("compat post: %d %s", r.Status, r.Body)
	}
	if got := serversIDs(t, n.Do(t, "GET", "/v1/servers/open", nil)); got != "s1" {
		t.Fatalf("servers %q, want s1", got)
	}
}

// The token file is read when the configuration loads: it must be readable by its owner only
// and not empty, and an error names the flag and the file, never the token.
func TestServersTokenFile(t *testing.T) {
	const token = "a-token-that-must-not-leak"
	load := func(file string) error {
		_, err := config.Load([]string{"--node-id", "n1", "--servers-token-file", file}, nil, nil, servers.Settings)
		return err
	}
	if err := load(writeToken(t, token, 0o600)); err != nil {
		t.Fatalf("an owner-only token file: %v", err)
	}
	for _, c := range []struct {
		name, file, want string
	}{
		{"readable by others", writeToken(t, token, 0o644), "accessible by other users"},
		{"readable by the group", writeToken(t, token, 0o640), "accessible by other users"},
		{"empty", writeToken(t, " \n", 0o600), "empty"},
		{"missing", filepath.Join(t.TempDir(), "none"), "no such file"},
	} {
		err := load(c.file)
		if err == nil || !strings.Contains(err.Error(), "--servers-token-file") || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), token) {
			t.Errorf("%s: %v; want an error about --servers-token-file saying %q, without the token", c.name, err, c.want)
		}
	}
}
