package fakenear

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// blockReference is nearcore's BlockReference as params carry it: finality, or block_id (a
// height or a hash), flattened into the method's params.
type blockReference struct {
	Finality *string         `json:"finality"`
	BlockID  json.RawMessage `json:"block_id"`
}

// resolve finds the referenced block; c.mu is held.
func (c *chain) resolve(ref blockReference) (*block, *rpcError) {
	if len(ref.BlockID) > 0 && !bytes.Equal(ref.BlockID, []byte("null")) {
		var height uint64
		if json.Unmarshal(ref.BlockID, &height) == nil {
			if b := c.blockAt(height); b != nil {
				return b, nil
			}
			return nil, errUnknownBlock(map[string]any{"block_id": height},
				fmt.Sprintf("DB Not Found Error: BLOCK HEIGHT: %d \n Cause: Unknown", height))
		}
		var hash near.Hash
		if json.Unmarshal(ref.BlockID, &hash) == nil {
			if b := c.byHash[hash]; b != nil {
				return b, nil
			}
			return nil, errUnknownBlock(map[string]any{"block_id": hash}, "DB Not Found Error: BLOCK HEADER: "+hash.String())
		}
		return nil, errParse("Failed parsing args: block_id is neither a height nor a hash")
	}
	if ref.Finality == nil {
		return nil, errParse("Failed parsing args: missing field `finality` or `block_id`")
	}
	switch *ref.Finality {
	case "optimistic":
		return c.head(), nil
	case "final", "near-final":
		return c.final(), nil
	}
	return nil, errParse(fmt.Sprintf("Failed parsing args: unknown variant `%s`, expected one of `optimistic`, `near-final`, `final`", *ref.Finality))
}

// block answers `block`: {"finality"} or {"block_id"}, or the legacy [block_id].
func (e *Endpoint) block(params json.RawMessage) (json.RawMessage, *rpcError) {
	var ref blockReference
	var list []json.RawMessage
	if json.Unmarshal(params, &list) == nil && len(list) == 1 {
		ref.BlockID = list[0]
	} else if err := json.Unmarshal(params, &ref); err != nil {
		return nil, errParse("Failed parsing args: " + err.Error())
	}
	c := e.fake.chain
	c.mu.Lock()
	defer c.mu.Unlock()
	b, rerr := c.resolve(ref)
	if rerr != nil {
		return nil, rerr
	}
	return marshalResult(b.view(c.blocks[0].height, c.final().hash))
}

// queryParams are the params of `query` in the form with request_type.
type queryParams struct {
	blockReference
	RequestType string          `json:"request_type"`
	AccountID   string          `json:"account_id"`
	PublicKey   *near.PublicKey `json:"public_key"`
}

// query answers `query` for view_access_key, view_access_key_list and view_account.
func (e *Endpoint) query(params json.RawMessage) (json.RawMessage, *rpcError) {
	var p queryParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, errParse("Failed parsing args: " + err.Error())
	}
	c := e.fake.chain
	c.mu.Lock()
	defer c.mu.Unlock()
	b, rerr := c.resolve(p.blockReference)
	if rerr != nil {
		return nil, rerr
	}
	acct := b.state.accounts[p.AccountID]
	switch p.RequestType {
	case "view_access_key":
		if p.PublicKey == nil {
			return nil, errParse("Failed parsing args: missing field `public_key`")
		}
		var k *accessKey
		if acct != nil {
			k = acct.keys[*p.PublicKey]
		}
		if k == nil {
			// nearcore answers a missing key (of an existing account or not) with a result
			// holding an error message, a form kept for old clients.
			return marshalResult(struct {
				BlockHash   near.Hash `json:"block_hash"`
				BlockHeight uint64    `json:"block_height"`
				Error       string    `json:"error"`
				Logs        []string  `json:"logs"`
			}{b.hash, b.height, fmt.Sprintf("access key %s does not exist while viewing", p.PublicKey), []string{}})
		}
		return marshalResult(struct {
			Nonce       uint64                   `json:"nonce"`
			Permission  near.AccessKeyPermission `json:"permission"`
			BlockHeight uint64                   `json:"block_height"`
			BlockHash   near.Hash                `json:"block_hash"`
		}{k.nonce, k.perm, b.height, b.hash})
	case "view_access_key_list":
		type keyView struct {
			PublicKey near.PublicKey `json:"public_key"`
			AccessKey struct {
				Nonce      uint64                   `json:"nonce"`
				Permission near.AccessKeyPermission `json:"permission"`
			} `json:"access_key"`
		}
		keys := []keyView{}
		if acct != nil {
			for pk, k := range acct.keys {
				v := keyView{PublicKey: pk}
				v.AccessKey.Nonce, v.AccessKey.Permission = k.nonce, k.perm
				keys = append(keys, v)
			}
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].PublicKey.String() < keys[j].PublicKey.String() })
		return marshalResult(struct {
			Keys        []keyView `json:"keys"`
			BlockHeight uint64    `json:"block_height"`
			BlockHash   near.Hash `json:"block_hash"`
		}{keys, b.height, b.hash})
	case "view_account":
		if acct == nil {
			return nil, errUnknownAccount(p.AccountID, b)
		}
		return marshalResult(struct {
			Amount        near.U128 `json:"amount"`
			Locked        near.U128 `json:"locked"`
			CodeHash      string    `json:"code_hash"`
			StorageUsage  uint64    `json:"storage_usage"`
			StoragePaidAt uint64    `json:"storage_paid_at"`
			BlockHeight   uint64    `json:"block_height"`
			BlockHash     near.Hash `json:"block_hash"`
		}{u128(acct.balance), near.U128{}, "11111111111111111111111111111111", 182 + 100*uint64(len(acct.keys)), 0, b.height, b.hash})
	}
	return nil, errParse(fmt.Sprintf("Failed parsing args: unknown or unsupported request_type `%s`", p.RequestType))
}

// statusView is the `status` result (and GET /status): the chain id and sync info clients read.
func (f *Fake) statusView(e *Endpoint) any {
	c := f.chain
	c.mu.Lock()
	defer c.mu.Unlock()
	head := c.head()
	type syncInfo struct {
		LatestBlockHash     near.Hash `json:"latest_block_hash"`
		LatestBlockHeight   uint64    `json:"latest_block_height"`
		LatestStateRoot     near.Hash `json:"latest_state_root"`
		LatestBlockTime     string    `json:"latest_block_time"`
		Syncing             bool      `json:"syncing"`
		EarliestBlockHash   near.Hash `json:"earliest_block_hash"`
		EarliestBlockHeight uint64    `json:"earliest_block_height"`
		EarliestBlockTime   string    `json:"earliest_block_time"`
	}
	return struct {
		Version               map[string]string `json:"version"`
		ChainID               string            `json:"chain_id"`
		ProtocolVersion       uint64            `json:"protocol_version"`
		LatestProtocolVersion uint64            `json:"latest_protocol_version"`
		RPCAddr               string            `json:"rpc_addr"`
		Validators            []any             `json:"validators"`
		SyncInfo              syncInfo          `json:"sync_info"`
		ValidatorAccountID    *string           `json:"validator_account_id"`
		NodePublicKey         string            `json:"node_public_key"`
		UptimeSec             int64             `json:"uptime_sec"`
	}{
		Version: map[string]string{"version": "fakenear", "build": "fakenear", "rustc_version": ""},
		ChainID: f.cfg.ChainID, ProtocolVersion: protocolVersion, LatestProtocolVersion: protocolVersion,
		RPCAddr: e.addr, Validators: []any{},
		SyncInfo: syncInfo{
			LatestBlockHash: head.hash, LatestBlockHeight: head.height, LatestStateRoot: head.derived("state"),
			LatestBlockTime:   head.time.UTC().Format(time.RFC3339Nano),
			EarliestBlockHash: c.blocks[0].hash, EarliestBlockHeight: c.blocks[0].height,
			EarliestBlockTime: c.blocks[0].time.UTC().Format(time.RFC3339Nano),
		},
		NodePublicKey: KeyFromLabel("node").PublicKey().String(),
	}
}
