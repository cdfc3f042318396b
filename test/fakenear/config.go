package fakenear

import (
	"errors"
	"log/slog"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// Config configures a Fake. The zero value is usable: every field has a default.
type Config struct {
	// ChainID is what `status` answers as chain_id; it also seeds the block hashes. Default
	// "fakenear".
	ChainID string
	// GenesisHeight is the height of the first block. Default 1000.
	GenesisHeight uint64
	// BlockInterval is how often a block is produced. Default 100ms. Ignored when Manual.
	BlockInterval time.Duration
	// Manual produces blocks only when Step is called (or POST /fake/blocks): tests then
	// decide exactly which transactions share a block.
	Manual bool
	// ValidityPeriod is nearcore's transaction_validity_period in blocks. Default 100
	// (mainnet: 86400).
	ValidityPeriod uint64
	// FinalityLag is how many blocks the final block trails the head. Default 2, as doomslug
	// finality usually does.
	FinalityLag uint64
	// PollTimeout is how long send_tx and tx wait for the requested wait_until before they
	// answer TIMEOUT_ERROR (nearcore's polling_timeout). Default 10s.
	PollTimeout time.Duration
	// TxFee is a flat fee in yoctoNEAR every landed transaction burns, counted in the cost that
	// NotEnoughBalance and NotEnoughAllowance compare. Default 0: balances move only by the
	// deposits, which keeps test arithmetic exact.
	TxFee near.U128
	// Seed seeds the fault decisions and the latency jitter.
	Seed uint64

	// NonceUpperBoundAtRPC also checks nonce < (head+1)·10⁶ when a transaction is received, so
	// that send_tx answers NonceTooLarge. nearcore does not: its RPC validation skips the upper
	// bound ("we do not know which block the transaction will be included"), and a transaction
	// with a nonce too large is accepted, then dropped when a chunk is produced. Off by default.
	NonceUpperBoundAtRPC bool
	// LegacyAccountIDCheck decodes transactions whose signer or receiver id is not a valid
	// account id and refuses them at validation with InvalidSignerId / InvalidReceiverId, as
	// nodes did before account ids were validated while decoding. Current nearcore refuses to
	// decode such a transaction: send_tx answers a PARSE_ERROR (the default here).
	LegacyAccountIDCheck bool

	// Accounts exist from genesis.
	Accounts []Account
	// Logger receives the fake's logs; default slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultChainID        = "fakenear"
	DefaultGenesisHeight  = 1000
	DefaultBlockInterval  = 100 * time.Millisecond
	DefaultValidityPeriod = 100
	DefaultFinalityLag    = 2
	DefaultPollTimeout    = 10 * time.Second
)

// nonceMultiplier is nearcore's ACCESS_KEY_NONCE_RANGE_MULTIPLIER: nonces are tied to block
// heights by it (upper bound h·10⁶, new keys (h-1)·10⁶).
const nonceMultiplier = 1_000_000

func (c Config) withDefaults() (Config, error) {
	if c.ChainID == "" {
		c.ChainID = DefaultChainID
	}
	if c.GenesisHeight == 0 {
		c.GenesisHeight = DefaultGenesisHeight
	}
	if c.BlockInterval == 0 {
		c.BlockInterval = DefaultBlockInterval
	}
	if c.BlockInterval < 0 {
		return c, errors.New("fakenear: BlockInterval is negative")
	}
	if c.ValidityPeriod == 0 {
		c.ValidityPeriod = DefaultValidityPeriod
	}
	if c.FinalityLag == 0 {
		c.FinalityLag = DefaultFinalityLag
	}
	if c.PollTimeout == 0 {
		c.PollTimeout = DefaultPollTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
