package fakenear

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// block is one block of the chain. Its transactions were applied to the state of the previous
// block to give state.
type block struct {
	height uint64
	hash   near.Hash
	prev   near.Hash
	time   time.Time
	state  *state
}

// blockHash derives a block's hash from the chain id, its height and its parent's hash: the
// same configuration always gives the same chain of hashes, which keeps tests reproducible.
func blockHash(chainID string, height uint64, prev near.Hash) near.Hash {
	h := sha256.New()
	h.Write([]byte("fakenear block\x00" + chainID + "\x00"))
	h.Write(binary.LittleEndian.AppendUint64(nil, height))
	h.Write(prev[:])
	var out near.Hash
	copy(out[:], h.Sum(nil))
	return out
}

// BlockInfo names a block for the Go API.
type BlockInfo struct {
	Height uint64
	Hash   near.Hash
}

func (b *block) info() BlockInfo { return BlockInfo{Height: b.height, Hash: b.hash} }

// blockView is the `block` result: nearcore's BlockView, with the header fields clients read
// and plausible constants for the ones that describe consensus the fake does not have.
type blockView struct {
	Author string          `json:"author"`
	Header blockHeaderView `json:"header"`
	Chunks []chunkHeader   `json:"chunks"`
}

type blockHeaderView struct {
	Height                uint64    `json:"height"`
	PrevHeight            uint64    `json:"prev_height"`
	EpochID               near.Hash `json:"epoch_id"`
	NextEpochID           near.Hash `json:"next_epoch_id"`
	Hash                  near.Hash `json:"hash"`
	PrevHash              near.Hash `json:"prev_hash"`
	PrevStateRoot         near.Hash `json:"prev_state_root"`
	ChunkReceiptsRoot     near.Hash `json:"chunk_receipts_root"`
	ChunkHeadersRoot      near.Hash `json:"chunk_headers_root"`
	ChunkTxRoot           near.Hash `json:"chunk_tx_root"`
	OutcomeRoot           near.Hash `json:"outcome_root"`
	ChunksIncluded        uint64    `json:"chunks_included"`
	ChallengesRoot        near.Hash `json:"challenges_root"`
	Timestamp             uint64    `json:"timestamp"`
	TimestampNanosec      string    `json:"timestamp_nanosec"`
	RandomValue           near.Hash `json:"random_value"`
	ValidatorProposals    []any     `json:"validator_proposals"`
	ChunkMask             []bool    `json:"chunk_mask"`
	GasPrice              string    `json:"gas_price"`
	BlockOrdinal          uint64    `json:"block_ordinal"`
	RentPaid              string    `json:"rent_paid"`
	ValidatorReward       string    `json:"validator_reward"`
	TotalSupply           string    `json:"total_supply"`
	ChallengesResult      []any     `json:"challenges_result"`
	LastFinalBlock        near.Hash `json:"last_final_block"`
	LastDSFinalBlock      near.Hash `json:"last_ds_final_block"`
	NextBPHash            near.Hash `json:"next_bp_hash"`
	BlockMerkleRoot       near.Hash `json:"block_merkle_root"`
	EpochSyncDataHash     *string   `json:"epoch_sync_data_hash"`
	Approvals             []*string `json:"approvals"`
	Signature             string    `json:"signature"`
	LatestProtocolVersion uint64    `json:"latest_protocol_version"`
}

type chunkHeader struct {
	ChunkHash      near.Hash `json:"chunk_hash"`
	PrevBlockHash  near.Hash `json:"prev_block_hash"`
	HeightCreated  uint64    `json:"height_created"`
	HeightIncluded uint64    `json:"height_included"`
	ShardID        uint64    `json:"shard_id"`
	GasUsed        uint64    `json:"gas_used"`
	GasLimit       uint64    `json:"gas_limit"`
	TxRoot         near.Hash `json:"tx_root"`
	OutcomeRoot    near.Hash `json:"outcome_root"`
	PrevStateRoot  near.Hash `json:"prev_state_root"`
}

// Constants the views report; the fake has no gas market and one protocol version.
const (
	gasPrice        = "100000000"
	protocolVersion = 73
	// fakeSignature is a well-formed ed25519 signature string for the fields that need one.
	fakeSignature = "ed25519:4YXUxzJUe1mRdwGr4sCvsvs6LRGWsC5ZxFYwXZx4jKWfdiqCizDTA8Zk1mFe5mrGmaAGBgfnsXwPwcTUGXCGbhS3"
)

// derived returns a hash derived from the block's, for the roots a view must show.
func (b *block) derived(what string) near.Hash {
	return sha256.Sum256(append([]byte(what), b.hash[:]...))
}

func (b *block) view(genesis uint64, final near.Hash) blockView {
	ts := uint64(b.time.UnixNano())
	epoch := blockHash("epoch", genesis, near.Hash{})
	return blockView{
		Author: "fakenear-validator",
		Header: blockHeaderView{
			Height: b.height, PrevHeight: b.height - 1,
			EpochID: epoch, NextEpochID: blockHash("epoch", genesis+1, near.Hash{}),
			Hash: b.hash, PrevHash: b.prev,
			PrevStateRoot: b.derived("state"), ChunkReceiptsRoot: b.derived("receipts"),
			ChunkHeadersRoot: b.derived("chunks"), ChunkTxRoot: b.derived("txs"), OutcomeRoot: b.derived("outcomes"),
			ChunksIncluded: 1, Timestamp: ts, TimestampNanosec: strconv.FormatUint(ts, 10),
			RandomValue: b.derived("random"), ValidatorProposals: []any{}, ChunkMask: []bool{true},
			GasPrice: gasPrice, BlockOrdinal: b.height - genesis + 1, RentPaid: "0", ValidatorReward: "0", TotalSupply: "2537563102473208349542328838547932",
			ChallengesResult: []any{}, LastFinalBlock: final, LastDSFinalBlock: b.prev,
			NextBPHash: blockHash("bp", genesis, near.Hash{}), BlockMerkleRoot: b.derived("merkle"),
			Approvals: []*string{}, Signature: fakeSignature, LatestProtocolVersion: protocolVersion,
		},
		Chunks: []chunkHeader{{
			ChunkHash: b.derived("chunk"), PrevBlockHash: b.prev, HeightCreated: b.height, HeightIncluded: b.height,
			GasLimit: 1_000_000_000_000_000, TxRoot: b.derived("txs"), OutcomeRoot: b.derived("outcomes"),
			PrevStateRoot: b.derived("state"),
		}},
	}
}
