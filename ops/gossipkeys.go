package ops

import (
	"context"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/cluster"
)

// GossipKeys is the cluster's gossip keyring, as the key rotation endpoints need it
// (cluster.Membership).
type GossipKeys interface {
	KeyStatus(op string, key []byte) []cluster.KeyStatus
	ChangeKey(ctx context.Context, op string, key []byte) ([]cluster.KeyStatus, bool, error)
}

// KeyChange is the body of POST /v1/cluster/gossip-keys.
type KeyChange struct {
	Op  string `json:"op"`  // install, use or remove
	Key string `json:"key"` // base64 of the 32-byte key
}

// KeyChangeResult is the answer to a key change: every member's keyring, and whether every
// alive member shows the change (200) or not yet (202: repeat the request; follow it with
// GET).
type KeyChangeResult struct {
	Complete bool                `json:"complete"`
	Members  []cluster.KeyStatus `json:"members"`
}

// keyChangeWait is how long a key change waits for every member to show it.
const keyChangeWait = 15 * time.Second

// listGossipKeys answers GET /v1/cluster/gossip-keys.
func listGossipKeys(keys GossipKeys) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		api.WriteJSON(w, http.StatusOK, KeyChangeResult{Complete: true, Members: keys.KeyStatus("", nil)})
	}
}

// changeGossipKey answers POST /v1/cluster/gossip-keys.
func changeGossipKey(keys GossipKeys) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req KeyChange
		if err := api.DecodeJSON(r, &req); err != nil {
			api.WriteAPIError(w, err)
			return
		}
		switch req.Op {
		case cluster.KeyInstall, cluster.KeyUse, cluster.KeyRemove:
		default:
			api.WriteAPIError(w, api.Errorf(http.StatusBadRequest, "invalid_request", `"op" must be install, use or remove`))
			return
		}
		key, err := base64.StdEncoding.DecodeString(req.Key)
		if err != nil || len(key) != 32 {
			api.WriteAPIError(w, api.Errorf(http.StatusBadRequest, "invalid_request", `"key" must be base64 of 32 bytes`))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), keyChangeWait)
		defer cancel()
		members, complete, err := keys.ChangeKey(ctx, req.Op, key)
		if err != nil {
			api.WriteAPIError(w, api.Errorf(http.StatusConflict, "gossip_key_refused", "%v", err))
			return
		}
		status := http.StatusOK
		if !complete {
			status = http.StatusAccepted
		}
		api.WriteJSON(w, status, KeyChangeResult{Complete: complete, Members: members})
	}
}
