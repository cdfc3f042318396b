package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// PutServerRequest is the body of PUT /v1/servers/{registry}/{server_id}.
type PutServerRequest struct {
	Address string `json:"address"`
	Region  string `json:"region,omitempty"`
	// Meta is an optional JSON object of at most 4 KiB.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// Heartbeat is the answer of a server registration or heartbeat.
type Heartbeat struct {
	ServerID     string `json:"server_id"`
	RegisteredAt int64  `json:"registered_at"` // Unix ms
	LastSeen     int64  `json:"last_seen"`     // Unix ms
	// Created is true for a new entry (201), false for a heartbeat of a live one (200).
	Created bool `json:"-"`
}

// Server is one entry of a server registry listing.
type Server struct {
	ServerID     string          `json:"server_id"`
	Address      string          `json:"address"`
	Region       string          `json:"region"`
	Meta         json.RawMessage `json:"meta"`
	RegisteredAt int64           `json:"registered_at"` // Unix ms
	LastSeen     int64           `json:"last_seen"`     // Unix ms
}

func serversPath(registry string) string { return "/v1/servers/" + seg(registry) }

// PutServer registers a server or records its heartbeat. Idempotent (a retry after a lost
// answer may report Created false for the entry its first attempt created).
func (c *Client) PutServer(ctx context.Context, registry, serverID string, req PutServerRequest) (*Heartbeat, error) {
	var out Heartbeat
	status, err := c.do(ctx, call{actor: &actor{kindServers, registry}, method: http.MethodPut, path: serversPath(registry) + "/" + seg(serverID), body: req, servers: true, idempotent: true}, &out)
	if err != nil {
		return nil, err
	}
	out.Created = status == http.StatusCreated
	return &out, nil
}

// ListServers lists the servers seen within the registry's server_ttl.
func (c *Client) ListServers(ctx context.Context, registry string) ([]Server, error) {
	var out struct {
		Servers []Server `json:"servers"`
	}
	if _, err := c.do(ctx, call{actor: &actor{kindServers, registry}, method: http.MethodGet, path: serversPath(registry), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Servers, nil
}

// DeleteServer removes a server (admin). A call retried after a lost answer may end in 404
// because its first attempt deleted the entry.
func (c *Client) DeleteServer(ctx context.Context, registry, serverID string) error {
	_, err := c.do(ctx, call{actor: &actor{kindServers, registry}, method: http.MethodDelete, path: serversPath(registry) + "/" + seg(serverID), admin: true, idempotent: true}, nil)
	return err
}
